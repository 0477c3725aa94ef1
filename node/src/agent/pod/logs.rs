//! Container logs as the API's `pods/log` serves them, read from the CRI log
//! files (`<pod log dir>/<container>/<restartCount>.log`, lines of
//! `<RFC3339Nano time> <stream> <P|F> <text>`, `P` marking a partial line
//! continued by the next).
//!
//! The API server calls [`read`] with the pod's identity; the files outlive
//! the containers, so `--previous` works after a restart.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ContainerState, Pod};
use k8s_openapi::jiff::Timestamp;

use super::cri_config;

/// A failed log read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// No log exists for the container (never started, or no previous run).
    #[error("no {which} log for container {container:?} of pod {pod:?}")]
    NotFound {
        /// `current` or `previous`.
        which: &'static str,
        /// The container.
        container: String,
        /// `namespace/name`.
        pod: String,
    },
    /// The pod's status knows no such container yet.
    #[error("container {container:?} in pod {pod:?} is not available")]
    Unavailable {
        /// The container.
        container: String,
        /// The pod's name.
        pod: String,
    },
    /// `--previous` of a container that never terminated.
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious {
        /// The container.
        container: String,
        /// The pod's name.
        pod: String,
    },
    /// A terminated container whose run left nothing to read.
    #[error("container {container:?} in pod {pod:?} is terminated")]
    Terminated {
        /// The container.
        container: String,
        /// The pod's name.
        pod: String,
    },
    /// A container that has not started yet, and why.
    #[error("container {container:?} in pod {pod:?} is waiting to start{why}")]
    Waiting {
        /// The container.
        container: String,
        /// The pod's name.
        pod: String,
        /// `: <what it waits for>`, or ` - no logs yet`.
        why: String,
    },
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Which pod and container.
#[derive(Debug, Clone)]
pub struct LogTarget<'a> {
    /// Root of the pod log directories (`AgentConfig::log_root()`).
    pub log_root: &'a Path,
    /// Pod namespace.
    pub namespace: &'a str,
    /// Pod name.
    pub name: &'a str,
    /// Pod UID.
    pub uid: &'a str,
    /// Container name.
    pub container: &'a str,
}

/// The options of `pods/log` that apply to reading a file.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// The run before the current one.
    pub previous: bool,
    /// Only the last N lines.
    pub tail_lines: Option<usize>,
    /// Only lines at or after this time (`sinceSeconds` is converted by the
    /// caller).
    pub since: Option<Timestamp>,
    /// Prefix each line with its RFC3339Nano time.
    pub timestamps: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<usize>,
}

/// Refuses a log request the way a kubelet does from the pod's status
/// (`kubectl logs` shows these words): a container that is still waiting
/// (saying why, for image pulls), one with no earlier run for `--previous`,
/// one the status does not list yet.
pub fn check_status(pod: &Pod, container: &str, previous: bool) -> Result<(), LogError> {
    let status = pod.status.as_ref();
    let statuses = status.into_iter().flat_map(|s| {
        s.container_statuses
            .iter()
            .chain(&s.init_container_statuses)
            .chain(&s.ephemeral_container_statuses)
            .flatten()
    });
    let (container, pod) = (
        container.to_string(),
        pod.metadata.name.clone().unwrap_or_default(),
    );
    let Some(found) = statuses.into_iter().find(|c| c.name == container) else {
        return Err(LogError::Unavailable { container, pod });
    };
    let ran = |state: Option<&ContainerState>| {
        state
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.container_id.as_deref().is_some_and(|id| !id.is_empty()))
    };
    let last = found.last_state.as_ref();
    let state = found.state.as_ref();
    if previous {
        return if ran(last) {
            Ok(())
        } else {
            Err(LogError::NoPrevious { container, pod })
        };
    }
    if state.is_some_and(|s| s.running.is_some()) || ran(state) {
        return Ok(());
    }
    let terminated = state.is_some_and(|s| s.terminated.is_some());
    if terminated || last.is_some_and(|s| s.terminated.is_some()) {
        return if ran(last) {
            Ok(())
        } else {
            Err(LogError::Terminated { container, pod })
        };
    }
    let why = match state.and_then(|s| s.waiting.as_ref()) {
        Some(waiting) => match waiting.reason.as_deref().unwrap_or_default() {
            "ErrImagePull" => ": image can't be pulled".to_string(),
            "ImagePullBackOff" => ": trying and failing to pull image".to_string(),
            reason => format!(": {reason}"),
        },
        None => " - no logs yet".to_string(),
    };
    Err(LogError::Waiting {
        container,
        pod,
        why,
    })
}

/// The log file of the current (or previous) run of a container.
pub fn log_file(target: &LogTarget<'_>, previous: bool) -> Result<PathBuf, LogError> {
    let dir = target.log_root.join(format!(
        "{}_{}_{}",
        target.namespace, target.name, target.uid
    ));
    let container_dir = dir.join(target.container);
    let mut runs: Vec<u32> = std::fs::read_dir(&container_dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    runs.sort_unstable();
    let pick = if previous {
        runs.len().checked_sub(2).map(|i| runs[i])
    } else {
        runs.last().copied()
    };
    match pick {
        Some(run) => Ok(dir.join(cri_config::container_log_path(target.container, run))),
        None => Err(LogError::NotFound {
            which: if previous { "previous" } else { "current" },
            container: target.container.to_string(),
            pod: format!("{}/{}", target.namespace, target.name),
        }),
    }
}

/// Reads a container's log as `kubectl logs` shows it.
pub fn read(target: &LogTarget<'_>, options: &LogOptions) -> Result<Vec<u8>, LogError> {
    let path = log_file(target, options.previous)?;
    let raw = std::fs::read(&path).map_err(|source| LogError::Io { path, source })?;
    Ok(render(&raw, options))
}

/// The length of the leading part of `raw` made of whole records: each
/// ends in a newline, and the last is not a partial (`P`) line waiting for
/// its continuation. A follower renders this much and keeps the rest.
pub fn complete_prefix(raw: &[u8]) -> usize {
    let mut end = 0;
    let mut start = 0;
    while let Some(nl) = raw[start..].iter().position(|&b| b == b'\n') {
        let record = &raw[start..start + nl];
        start += nl + 1;
        let tag = record.split(|&b| b == b' ').nth(2);
        if tag != Some(b"P".as_slice()) {
            end = start;
        }
    }
    end
}

/// One complete log line.
struct Line<'a> {
    time: &'a str,
    text: Vec<u8>,
}

/// Joins partial lines and applies the options.
pub fn render(raw: &[u8], options: &LogOptions) -> Vec<u8> {
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut pending: Option<Line<'_>> = None;
    for record in raw.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
        let mut parts = record.splitn(4, |&b| b == b' ');
        let (Some(time), Some(_stream), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let text = parts.next().unwrap_or_default();
        let time = std::str::from_utf8(time).unwrap_or_default();
        let line = pending.get_or_insert_with(|| Line {
            time,
            text: Vec::new(),
        });
        line.text.extend_from_slice(text);
        if tag != b"P" {
            lines.extend(pending.take());
        }
    }
    lines.extend(pending.take());
    if let Some(since) = options.since {
        lines.retain(|l| l.time.parse::<Timestamp>().map_or(true, |t| t >= since));
    }
    if let Some(tail) = options.tail_lines {
        let skip = lines.len().saturating_sub(tail);
        lines.drain(..skip);
    }
    let mut out = Vec::new();
    for l in lines {
        if options.timestamps {
            out.extend_from_slice(l.time.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&l.text);
        out.push(b'\n');
    }
    if let Some(limit) = options.limit_bytes {
        out.truncate(limit);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `check_status`'s answer for a pod whose container `c` has `status`.
    fn refusal(status: serde_json::Value, previous: bool) -> Option<String> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"containerStatuses": [status]},
        }))
        .unwrap();
        check_status(&pod, "c", previous)
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn log_requests_are_refused_from_the_status_as_a_kubelet_refuses_them() {
        let base =
            json!({"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0});
        let with = |extra: serde_json::Value| {
            let mut status = base.clone();
            for (k, v) in extra.as_object().unwrap() {
                status[k] = v.clone();
            }
            status
        };
        let running = with(json!({"state": {"running": {}}}));
        let exited = json!({"terminated": {"exitCode": 1, "containerID": "containerd://a"}});
        let crash_looping = with(json!({"state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": exited}));
        let cases = [
            (running.clone(), false, None),
            (crash_looping.clone(), false, None),
            (crash_looping, true, None),
            (
                running,
                true,
                Some("previous terminated container \"c\" in pod \"p\" not found"),
            ),
            (
                with(json!({"state": {"waiting": {"reason": "ImagePullBackOff"}}})),
                false,
                Some(
                    "container \"c\" in pod \"p\" is waiting to start: trying and failing to pull image",
                ),
            ),
            (
                with(json!({"state": {"waiting": {"reason": "ErrImagePull"}}})),
                false,
                Some("container \"c\" in pod \"p\" is waiting to start: image can't be pulled"),
            ),
            (
                with(json!({"state": {"waiting": {"reason": "ContainerCreating"}}})),
                false,
                Some("container \"c\" in pod \"p\" is waiting to start: ContainerCreating"),
            ),
            (
                base.clone(),
                false,
                Some("container \"c\" in pod \"p\" is waiting to start - no logs yet"),
            ),
            (
                with(json!({"state": {"terminated": {"exitCode": 128, "reason": "StartError"}}})),
                false,
                Some("container \"c\" in pod \"p\" is terminated"),
            ),
            (
                with(json!({"name": "other"})),
                false,
                Some("container \"c\" in pod \"p\" is not available"),
            ),
        ];
        for (status, previous, want) in cases {
            assert_eq!(
                refusal(status.clone(), previous).as_deref(),
                want,
                "{status} previous={previous}"
            );
        }
    }

    const RAW: &[u8] = b"2026-01-01T00:00:01.000000001Z stdout F one\n\
2026-01-01T00:00:02Z stderr P tw\n\
2026-01-01T00:00:02.5Z stderr F o\n\
2026-01-01T00:00:03Z stdout F three\n";

    #[test]
    fn partial_lines_join_and_options_apply() {
        assert_eq!(render(RAW, &LogOptions::default()), b"one\ntwo\nthree\n");
        let tail = LogOptions {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(render(RAW, &tail), b"two\nthree\n");
        let since = LogOptions {
            since: Some("2026-01-01T00:00:02Z".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(render(RAW, &since), b"two\nthree\n");
        let ts = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(render(RAW, &ts), b"2026-01-01T00:00:03Z three\n");
        let limit = LogOptions {
            limit_bytes: Some(5),
            ..Default::default()
        };
        assert_eq!(render(RAW, &limit), b"one\nt");
    }

    #[test]
    fn a_follower_keeps_unfinished_records_for_later() {
        assert_eq!(complete_prefix(RAW), RAW.len());
        let cut = b"2026-01-01T00:00:01Z stdout F one\n2026-01-01T00:00:02Z stderr P tw\n2026";
        assert_eq!(complete_prefix(cut), 34);
        assert_eq!(complete_prefix(b"no newline yet"), 0);
    }

    #[test]
    fn current_and_previous_runs_are_found_by_restart_count() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ns_p_u/c");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), "2026-01-01T00:00:00Z stdout F first\n").unwrap();
        std::fs::write(dir.join("1.log"), "2026-01-01T00:00:09Z stdout F second\n").unwrap();
        let target = LogTarget {
            log_root: root.path(),
            namespace: "ns",
            name: "p",
            uid: "u",
            container: "c",
        };
        assert_eq!(read(&target, &LogOptions::default()).unwrap(), b"second\n");
        let prev = LogOptions {
            previous: true,
            ..Default::default()
        };
        assert_eq!(read(&target, &prev).unwrap(), b"first\n");
        let other = LogTarget {
            container: "x",
            ..target
        };
        assert!(matches!(
            read(&other, &LogOptions::default()),
            Err(LogError::NotFound { .. })
        ));
    }
}
