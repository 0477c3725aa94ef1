"""Draws the soak bench's samples: usage: soak_plot.py SAMPLES.csv OUT.png.

Four panels over the run's minutes (server RSS, open fds, data directory
size, p99 latency per request kind), so growth with time shows as a slope.
"""

import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")  # no display on the build machines
import matplotlib.pyplot as plt  # noqa: E402


def main(samples_path, png_path):
    with open(samples_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("no samples in " + samples_path)
    minutes = [float(r["seconds"]) / 60 for r in rows]

    def column(name):
        return [float(r[name]) if r[name] not in ("", "NaN") else math.nan for r in rows]

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = [
        (axes[0][0], "server RSS (MiB)", ["rss_mib"]),
        (axes[0][1], "open file descriptors", ["fds"]),
        (axes[1][0], "data directory (MiB)", ["store_mib"]),
        (axes[1][1], "p99 latency (ms)",
         ["create_p99_ms", "update_p99_ms", "delete_p99_ms", "scale_p99_ms"]),
    ]
    for ax, title, names in panels:
        for name in names:
            label = name.split("_")[0] if len(names) > 1 else None
            ax.plot(minutes, column(name), marker=".", label=label)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if len(names) > 1:
            ax.legend()
    for ax in axes[1]:
        ax.set_xlabel("minutes of churn")
    fig.suptitle("skiff soak: %.0f min of churn" % minutes[-1])
    fig.tight_layout()
    fig.savefig(png_path, dpi=80)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
