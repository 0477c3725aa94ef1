//! `/logs/`: the host's log directory (`/var/log`), as a kubelet serves it
//! for `kubectl get --raw /api/v1/nodes/<node>/proxy/logs/…` — a directory
//! answers with a listing of links, a file with its content. It is
//! `nodes/log` to the authorizer.
//!
//! Stricter than the kubelet's file server: a request naming `..`, or any
//! path whose real location (symbolic links resolved) is outside the log
//! directory, is not found, so a link under `/var/log` cannot lend the
//! rest of the host to a caller.

use std::path::{Component, Path, PathBuf};

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, Uri, header};

use super::NodeState;

/// What `/logs/<path>` names inside `root`, when it is there and inside.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = Path::new(path.trim_start_matches('/'));
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    let root = root.canonicalize().ok()?;
    let real = root.join(relative).canonicalize().ok()?;
    real.starts_with(&root).then_some(real)
}

/// A directory's entries as links, as Go's file server lists them
/// (directories with a trailing `/`), sorted by name.
fn listing(dir: &Path) -> std::io::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => format!("{name}/"),
                _ => name,
            }
        })
        .collect();
    names.sort();
    let mut out = String::from("<pre>\n");
    for name in names {
        let escaped = html_escape(&name);
        out.push_str(&format!("<a href=\"{escaped}\">{escaped}</a>\n"));
    }
    out.push_str("</pre>\n");
    Ok(out)
}

/// `name` safe inside HTML text and a quoted attribute.
fn html_escape(name: &str) -> String {
    name.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

/// `GET /logs` and `GET /logs/`: the log directory itself.
pub(crate) async fn serve_root(state: State<NodeState>, uri: Uri) -> Response {
    serve(state, uri, String::new()).await
}

/// `GET /logs/<path>` (`path` percent-decoded, then judged).
pub(crate) async fn serve_path(
    state: State<NodeState>,
    uri: Uri,
    axum::extract::Path(path): axum::extract::Path<String>,
) -> Response {
    serve(state, uri, path).await
}

async fn serve(State(state): State<NodeState>, uri: Uri, path: String) -> Response {
    let Some(target) = resolve(&state.node_log_dir, &path) else {
        return not_found();
    };
    if target.is_dir() {
        // A directory is listed only under its name with a trailing slash,
        // so the links it holds resolve beside it.
        if !uri.path().ends_with('/') {
            let location = format!("{}/", uri.path());
            return (
                StatusCode::MOVED_PERMANENTLY,
                [(header::LOCATION, location)],
            )
                .into_response();
        }
        return match listing(&target) {
            Ok(html) => {
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
            }
            Err(_) => not_found(),
        };
    }
    match tokio::fs::File::open(&target).await {
        Ok(file) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            Body::from_stream(futures::stream::unfold(Some(file), read_chunk)),
        )
            .into_response(),
        Err(_) => not_found(),
    }
}

/// The next chunk of `file`, so a large log is sent as it is read; a read
/// error ends the answer.
async fn read_chunk(
    file: Option<tokio::fs::File>,
) -> Option<(std::io::Result<bytes::Bytes>, Option<tokio::fs::File>)> {
    use tokio::io::AsyncReadExt;
    let mut file = file?;
    let mut buf = vec![0u8; CHUNK];
    match file.read(&mut buf).await {
        Ok(0) => None,
        Ok(n) => {
            buf.truncate(n);
            Some((Ok(bytes::Bytes::from(buf)), Some(file)))
        }
        Err(e) => Some((Err(e), None)),
    }
}

/// How much of a file is read per chunk of the answer.
const CHUNK: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_really_lies_under_the_log_directory_is_served() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("log");
        std::fs::create_dir_all(root.join("apt")).expect("dirs");
        std::fs::write(root.join("syslog"), "line\n").expect("syslog");
        std::fs::write(dir.path().join("shadow"), "secret").expect("outside");
        std::os::unix::fs::symlink(dir.path().join("shadow"), root.join("escape")).expect("link");
        std::os::unix::fs::symlink(root.join("syslog"), root.join("latest")).expect("link");

        let canonical = |p: &Path| p.canonicalize().expect("real");
        assert_eq!(
            resolve(&root, "/syslog"),
            Some(canonical(&root.join("syslog")))
        );
        assert_eq!(resolve(&root, "/"), Some(canonical(&root)));
        assert_eq!(resolve(&root, ""), Some(canonical(&root)));
        assert_eq!(
            resolve(&root, "/latest"),
            Some(canonical(&root.join("syslog")))
        );
        for refused in [
            "/../shadow",
            "/apt/../../shadow",
            "/escape",
            "/missing",
            "//etc/passwd",
        ] {
            assert_eq!(resolve(&root, refused), None, "{refused}");
        }
        let html = listing(&root).expect("listing");
        assert!(html.contains("<a href=\"apt/\">apt/</a>"), "{html}");
        assert!(html.contains("<a href=\"syslog\">syslog</a>"), "{html}");
        assert!(
            html.starts_with("<pre>\n") && html.ends_with("</pre>\n"),
            "{html}"
        );
        assert_eq!(html_escape("a<b>\"c\""), "a&lt;b&gt;&quot;c&quot;");
    }
}
