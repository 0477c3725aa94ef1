//! `GET /containerLogs/{namespace}/{pod}/{container}`: a container's log
//! with the options of `pods/log`, streamed while the container runs when
//! `follow=true`.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use super::NodeState;
use super::status::failure;
use super::target::{self, TargetError};
use crate::agent::pod::logs::{self, LogError, LogOptions, LogTarget};
use crate::runtime::cri_api;

/// How often a follower looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The query of `pods/log` as the node receives it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogQuery {
    /// Stream until the container stops.
    #[serde(default)]
    pub follow: bool,
    /// The previous run.
    #[serde(default)]
    pub previous: bool,
    /// Only the last N lines.
    pub tail_lines: Option<i64>,
    /// Only lines of the last N seconds.
    pub since_seconds: Option<i64>,
    /// Only lines at or after this RFC 3339 time.
    pub since_time: Option<String>,
    /// Prefix each line with its time.
    #[serde(default)]
    pub timestamps: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
}

impl LogQuery {
    /// The reader's options, or why the query is invalid.
    pub(crate) fn options(&self) -> Result<LogOptions, String> {
        let since = match (self.since_seconds, &self.since_time) {
            (Some(_), Some(_)) => {
                return Err("at most one of sinceSeconds or sinceTime may be specified".into());
            }
            (Some(s), None) if s < 1 => return Err("sinceSeconds must be greater than 0".into()),
            (Some(s), None) => Some(Timestamp::now() - SignedDuration::from_secs(s)),
            (None, Some(t)) => Some(
                t.parse::<Timestamp>()
                    .map_err(|e| format!("sinceTime {t:?}: {e}"))?,
            ),
            (None, None) => None,
        };
        let tail_lines = match self.tail_lines {
            Some(n) if n < 0 => return Err("tailLines must be greater than or equal to 0".into()),
            n => n.map(|n| n as usize),
        };
        let limit_bytes = match self.limit_bytes {
            Some(n) if n < 1 => return Err("limitBytes must be greater than 0".into()),
            n => n.map(|n| n as usize),
        };
        Ok(LogOptions {
            previous: self.previous,
            tail_lines,
            since,
            timestamps: self.timestamps,
            limit_bytes,
        })
    }
}

/// Serves a container's log.
pub(crate) async fn serve(
    State(state): State<NodeState>,
    Path((namespace, name, container)): Path<(String, String, String)>,
    Query(query): Query<LogQuery>,
) -> Response {
    let options = match query.options() {
        Ok(o) => o,
        Err(message) => return failure(StatusCode::BAD_REQUEST, message),
    };
    let pod = match target::pod(&state.pods, &namespace, &name) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = target::check_container(&pod, &container) {
        return e.into_response();
    }
    if let Err(e) = logs::check_status(&pod, &container, options.previous) {
        return e.into_response();
    }
    let uid = target::uid(&pod).to_string();
    let log_target = LogTarget {
        log_root: &state.log_root,
        namespace: &namespace,
        name: &name,
        uid: &uid,
        container: &container,
    };
    let path = match logs::log_file(&log_target, options.previous) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let raw = match std::fs::read(&path) {
        Ok(raw) => raw,
        Err(source) => return LogError::Io { path, source }.into_response(),
    };
    let headers = [(http::header::CONTENT_TYPE, "text/plain")];
    if !query.follow || options.previous {
        return (headers, logs::render(&raw, &options)).into_response();
    }
    let complete = logs::complete_prefix(&raw);
    let first = logs::render(&raw[..complete], &options);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(source) => return LogError::Io { path, source }.into_response(),
    };
    let follower = Follower {
        state,
        path,
        file,
        next: None,
        offset: complete as u64,
        remaining: options.limit_bytes.map(|l| l.saturating_sub(first.len())),
        options: LogOptions {
            tail_lines: None,
            limit_bytes: None,
            ..options
        },
        uid,
        container,
    };
    let rest = futures::stream::unfold(follower, Follower::next);
    let body = futures::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(rest);
    (headers, Body::from_stream(body)).into_response()
}

/// The state of a `follow=true` reader.
struct Follower {
    state: NodeState,
    path: PathBuf,
    /// The file being read: the one at `path` until the log is rotated,
    /// then drained to its end before the new file at `path` is opened.
    file: std::fs::File,
    /// The new file once the log was seen rotated.
    next: Option<std::fs::File>,
    offset: u64,
    remaining: Option<usize>,
    options: LogOptions,
    uid: String,
    container: String,
}

impl Follower {
    /// The next chunk of rendered lines, or `None` once the container
    /// stopped and its file is drained (or the byte limit is reached).
    async fn next(mut self) -> Option<(Result<Vec<u8>, std::io::Error>, Self)> {
        loop {
            if self.remaining == Some(0) {
                return None;
            }
            let fresh = match read_from(&mut self.file, self.offset) {
                Ok(b) => b,
                Err(e) => return Some((Err(e), self)),
            };
            let complete = logs::complete_prefix(&fresh);
            if complete > 0 {
                self.offset += complete as u64;
                let mut out = logs::render(&fresh[..complete], &self.options);
                if let Some(remaining) = &mut self.remaining {
                    out.truncate(*remaining);
                    *remaining -= out.len();
                }
                if !out.is_empty() {
                    return Some((Ok(out), self));
                }
                continue;
            }
            // Drained: if the log was rotated, read the old file once more
            // (what the runtime wrote before it reopened the log), then go
            // on in the new one.
            if let Some(new) = self.next.take() {
                self.file = new;
                self.offset = 0;
                continue;
            }
            if let Some(new) = self.rotated() {
                self.next = Some(new);
                continue;
            }
            if !self.still_writing().await {
                return None;
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }

    /// The new file at the log's path, when the one being read was renamed
    /// away (the agent rotated the log).
    fn rotated(&self) -> Option<std::fs::File> {
        use std::os::unix::fs::MetadataExt;
        let reading = self.file.metadata().ok()?;
        let at_path = std::fs::metadata(&self.path).ok()?;
        if (reading.dev(), reading.ino()) == (at_path.dev(), at_path.ino()) {
            return None;
        }
        std::fs::File::open(&self.path).ok()
    }

    /// Whether the container instance writing this file still runs.
    async fn still_writing(&self) -> bool {
        let newest =
            target::newest_container(self.state.runtime.as_ref(), &self.uid, &self.container).await;
        match newest {
            Ok(Some(c)) => {
                c.state == cri_api::ContainerState::ContainerRunning as i32
                    && writes(&c, &self.path)
            }
            Ok(None) => false,
            // The runtime may be restarting; keep following.
            Err(TargetError::Runtime(e)) if e.is_unavailable() => true,
            Err(_) => false,
        }
    }
}

/// Whether a container instance writes `path` (its restart count names the
/// file).
fn writes(container: &cri_api::Container, path: &std::path::Path) -> bool {
    let run = crate::agent::pod::labels::restart_count(&container.annotations);
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == format!("{run}.log"))
}

fn read_from(file: &mut std::fs::File, offset: u64) -> Result<Vec<u8>, std::io::Error> {
    file.seek(SeekFrom::Start(offset))?;
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_options_are_checked_as_upstream() {
        let q = LogQuery {
            since_seconds: Some(0),
            ..Default::default()
        };
        assert!(q.options().is_err());
        let q = LogQuery {
            since_seconds: Some(5),
            since_time: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        assert!(q.options().is_err());
        let q = LogQuery {
            tail_lines: Some(-1),
            ..Default::default()
        };
        assert!(q.options().is_err());
        let q = LogQuery {
            since_time: Some("2026-01-01T00:00:00Z".into()),
            tail_lines: Some(3),
            timestamps: true,
            ..Default::default()
        };
        let o = q.options().unwrap();
        assert_eq!(o.tail_lines, Some(3));
        assert!(o.timestamps);
        assert_eq!(o.since, Some("2026-01-01T00:00:00Z".parse().unwrap()));
    }
}
