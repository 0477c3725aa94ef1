//! The kubelet's `/metrics/cadvisor`: per-container usage in cAdvisor's
//! metric names and labels, which monitoring stacks (Prometheus with the
//! usual recording rules and dashboards) scrape from every node. Rendered
//! from the same [`Summary`] as `/stats/summary`, so the figures agree.
//!
//! Each container's series carry `container`, `image`, `name` (the
//! runtime's container id), `namespace` and `pod`; each pod's own series
//! carry `container=""` and `image=""`, as cAdvisor's pod-cgroup series
//! do, so the common `container!="", image!=""` selectors count each
//! container once. There is no `id` (cgroup path) label: skiff's cgroups are
//! not laid out as the kubelet's, and a made-up path would mislead.

use std::fmt::Write as _;

use super::stats::{ContainerUsage, MemoryFigures, PodUsage, Summary, escape, seconds};

/// What the containers run, as the pod specs say: the image of container
/// `container` of pod `namespace/pod`.
pub(crate) trait Images {
    /// The image, or `None` when the pod or container is not known.
    fn image(&self, namespace: &str, pod: &str, container: &str) -> Option<String>;
}

/// Reads one memory figure (a family's value).
type MemoryFigure = fn(&MemoryFigures) -> Option<u64>;

/// One series' labels.
struct Labels<'a> {
    pod: &'a PodUsage,
    container: Option<(&'a ContainerUsage, String)>,
}

impl Labels<'_> {
    fn render(&self, extra: &str) -> String {
        let (container, image, name) = match &self.container {
            Some((c, image)) => (c.name.as_str(), image.as_str(), c.id.as_str()),
            None => ("", "", ""),
        };
        format!(
            "container=\"{}\",{extra}image=\"{}\",name=\"{}\",namespace=\"{}\",pod=\"{}\"",
            escape(container),
            escape(image),
            escape(name),
            escape(&self.pod.namespace),
            escape(&self.pod.name)
        )
    }
}

/// The exposition text (format 0.0.4), each sample stamped with when it
/// was taken (milliseconds).
pub(crate) fn render(summary: &Summary, images: &dyn Images) -> String {
    let mut series: Vec<(Labels<'_>, Option<&_>, Option<&MemoryFigures>, i64)> = Vec::new();
    for pod in &summary.pods {
        series.push((
            Labels {
                pod,
                container: None,
            },
            pod.cpu.as_ref(),
            pod.memory.as_ref(),
            pod.start_ns,
        ));
        for c in &pod.containers {
            let image = images
                .image(&pod.namespace, &pod.name, &c.name)
                .unwrap_or_default();
            series.push((
                Labels {
                    pod,
                    container: Some((c, image)),
                },
                c.cpu.as_ref(),
                c.memory.as_ref(),
                c.start_ns,
            ));
        }
    }
    let ms = |ns: i64| ns / 1_000_000;
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };
    family(
        &mut out,
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed in seconds.",
    );
    for (labels, cpu, _, _) in &series {
        if let Some(cpu) = cpu {
            let _ = writeln!(
                out,
                "container_cpu_usage_seconds_total{{{}}} {} {}",
                labels.render("cpu=\"total\","),
                seconds(cpu.usage_core_nano_seconds),
                ms(cpu.time_ns)
            );
        }
    }
    let memory_families: [(&str, &str, MemoryFigure); 3] = [
        (
            "container_memory_working_set_bytes",
            "Current working set in bytes.",
            |m| Some(m.working_set_bytes),
        ),
        (
            "container_memory_usage_bytes",
            "Current memory usage in bytes, including all memory regardless of when it was accessed",
            |m| Some(m.usage_bytes),
        ),
        ("container_memory_rss", "Size of RSS in bytes.", |m| {
            m.rss_bytes
        }),
    ];
    for (name, help, figure) in memory_families {
        family(&mut out, name, "gauge", help);
        for (labels, _, memory, _) in &series {
            if let Some((memory, value)) = memory.and_then(|m| Some((m, figure(m)?))) {
                let _ = writeln!(
                    out,
                    "{name}{{{}}} {value} {}",
                    labels.render(""),
                    ms(memory.time_ns)
                );
            }
        }
    }
    family(
        &mut out,
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds.",
    );
    for (labels, _, _, start_ns) in &series {
        let _ = writeln!(
            out,
            "container_start_time_seconds{{{}}} {}",
            labels.render(""),
            *start_ns as f64 / 1e9
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::node::stats::CpuFigures;

    struct Known;

    impl Images for Known {
        fn image(&self, namespace: &str, pod: &str, container: &str) -> Option<String> {
            ((namespace, pod, container) == ("default", "web", "main"))
                .then(|| "docker.io/library/nginx:1.27".to_string())
        }
    }

    fn summary() -> Summary {
        let cpu = |seconds: u64| CpuFigures {
            time_ns: 1_800_000_000_000_000_000,
            usage_core_nano_seconds: seconds * 1_000_000_000,
            usage_nano_cores: None,
        };
        let memory = |bytes: u64| MemoryFigures {
            time_ns: 1_800_000_000_000_000_000,
            working_set_bytes: bytes,
            usage_bytes: bytes * 2,
            rss_bytes: Some(bytes / 2),
            ..Default::default()
        };
        Summary {
            node_name: "n1".into(),
            node_start_ns: 0,
            cpu: cpu(100),
            memory: memory(1 << 30),
            fs: None,
            pods: vec![PodUsage {
                namespace: "default".into(),
                name: "web".into(),
                uid: "u1".into(),
                start_ns: 1_700_000_000_000_000_000,
                cpu: Some(cpu(3)),
                memory: Some(memory(8192)),
                volumes: Vec::new(),
                containers: vec![ContainerUsage {
                    name: "main".into(),
                    id: "abc123".into(),
                    start_ns: 1_700_000_000_000_000_000,
                    cpu: Some(cpu(2)),
                    memory: Some(memory(4096)),
                    rootfs_bytes: None,
                    logs_bytes: None,
                }],
            }],
        }
    }

    #[test]
    fn containers_and_pods_are_cadvisors_series() {
        let text = render(&summary(), &Known);
        let samples = skiff_common::metrics::exposition::parse(&text).expect("exposition");
        let find = |name: &str, container: &str| {
            samples
                .iter()
                .find(|s| s.name == name && s.label("container") == Some(container))
                .unwrap_or_else(|| panic!("{name} {container:?}: {text}"))
        };
        let cpu = find("container_cpu_usage_seconds_total", "main");
        assert_eq!(cpu.value, 2.0);
        assert_eq!(cpu.label("cpu").unwrap(), "total");
        assert_eq!(cpu.label("image").unwrap(), "docker.io/library/nginx:1.27");
        assert_eq!(cpu.label("name").unwrap(), "abc123");
        assert_eq!(cpu.label("pod").unwrap(), "web");
        assert_eq!(cpu.label("namespace").unwrap(), "default");
        // The pod's own series: container and image empty.
        let pod = find("container_cpu_usage_seconds_total", "");
        assert_eq!(pod.value, 3.0);
        assert_eq!(pod.label("image").unwrap(), "");
        assert_eq!(
            find("container_memory_working_set_bytes", "main").value,
            4096.0
        );
        assert_eq!(find("container_memory_usage_bytes", "main").value, 8192.0);
        assert_eq!(find("container_memory_rss", "main").value, 2048.0);
        assert_eq!(
            find("container_start_time_seconds", "main").value,
            1_700_000_000.0
        );
        assert!(text.contains("# TYPE container_cpu_usage_seconds_total counter\n"));
    }
}
