//! The health endpoints `/healthz`, `/livez` and `/readyz`, as upstream's
//! API server serves them: each is a list of named checks, answered with
//! `ok`, or with every check as `[+]name ok` / `[-]name failed: reason
//! withheld` and a 500 when one fails (the reason goes to the log, not to the
//! possibly anonymous caller). `?verbose` lists the checks when all pass too,
//! `?exclude=<name>` leaves a check out, and `/<endpoint>/<name>` runs one.
//!
//! The datastore's checks carry upstream's names whatever the backend, as
//! k3s keeps them over its own datastores: `etcd` (the store takes writes)
//! and, on `/readyz`, `etcd-readiness` (a read comes back in time).
//!
//! Liveness asks only whether the process answers: a full or failing disk
//! makes the server unready (writes are refused), not dead, so a supervisor
//! does not restart it into the same disk.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::server::Inner;
use crate::status::ApiError;

/// Which of the three endpoints a request asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/healthz` (upstream's deprecated aggregate).
    Healthz,
    /// `/livez`: is the process alive.
    Livez,
    /// `/readyz`: should it get traffic.
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }

    /// The endpoint's checks, in the order upstream lists its own.
    fn checks(self) -> &'static [Check] {
        match self {
            Endpoint::Healthz => &[Check::Ping, Check::Etcd],
            Endpoint::Livez => &[Check::Ping],
            Endpoint::Readyz => &[
                Check::Ping,
                Check::Etcd,
                Check::EtcdReadiness,
                Check::Shutdown,
            ],
        }
    }
}

/// One named check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Always passes: the server answers.
    Ping,
    /// The store accepts writes (no failed write, disk not short).
    Etcd,
    /// A read of the store answers within [`READINESS_TIMEOUT`]: on etcd a
    /// round trip to its leader, as upstream's check makes one.
    EtcdReadiness,
    /// The server is not shutting down (upstream's `shutdown`).
    Shutdown,
}

impl Check {
    fn name(self) -> &'static str {
        match self {
            Check::Ping => "ping",
            Check::Etcd => "etcd",
            Check::EtcdReadiness => "etcd-readiness",
            Check::Shutdown => "shutdown",
        }
    }

    async fn run(self, inner: &Inner) -> Result<(), String> {
        match self {
            Check::Ping => Ok(()),
            Check::Etcd => inner.store.health().map_err(|e| e.to_string()),
            Check::EtcdReadiness => {
                match tokio::time::timeout(READINESS_TIMEOUT, inner.store.mod_revision(PROBE_KEY))
                    .await
                {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!(
                        "no answer from the store within {READINESS_TIMEOUT:?}"
                    )),
                }
            }
            Check::Shutdown if inner.is_shutting_down() => {
                Err("process is shutting down".to_owned())
            }
            Check::Shutdown => Ok(()),
        }
    }
}

/// How long `etcd-readiness` waits for its read (upstream's
/// `--etcd-readycheck-timeout` default).
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);

/// The key `etcd-readiness` reads; it need not exist.
const PROBE_KEY: &str = "/registry/health";

/// What the query asked: `verbose`, and the checks to `exclude`.
#[derive(Default)]
struct Options {
    verbose: bool,
    exclude: Vec<String>,
}

fn options(query: Option<&str>) -> Options {
    let mut options = Options::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "verbose" => options.verbose = true,
            "exclude" => options.exclude.push(value.trim().to_owned()),
            _ => {}
        }
    }
    options
}

/// `/<endpoint>`: every check of the endpoint.
pub(crate) async fn all(endpoint: Endpoint, inner: Arc<Inner>, uri: http::Uri) -> Response {
    let options = options(uri.query());
    let mut body = String::new();
    let mut failed = false;
    for check in endpoint.checks() {
        let name = check.name();
        if options.exclude.iter().any(|e| e == name) {
            body.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match check.run(&inner).await {
            Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                tracing::warn!(check = name, %reason, "{} check failed", endpoint.name());
                body.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed = true;
            }
        }
    }
    let unknown: Vec<String> = options
        .exclude
        .iter()
        .filter(|e| endpoint.checks().iter().all(|c| c.name() != e.as_str()))
        .map(|e| format!("{e:?}"))
        .collect();
    if !unknown.is_empty() {
        body.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            unknown.join(",")
        ));
    }
    let endpoint = endpoint.name();
    if failed {
        body.push_str(&format!("{endpoint} check failed\n"));
        (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
    } else if options.verbose {
        body.push_str(&format!("{endpoint} check passed\n"));
        (StatusCode::OK, body).into_response()
    } else {
        (StatusCode::OK, "ok").into_response()
    }
}

/// `/<endpoint>/<check>`: one check, with its reason when it fails (as
/// upstream answers a single check).
pub(crate) async fn one(endpoint: Endpoint, inner: Arc<Inner>, check: String) -> Response {
    let Some(check) = endpoint.checks().iter().find(|c| c.name() == check) else {
        return ApiError::PathNotFound.into_response();
    };
    match check.run(&inner).await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        )
            .into_response(),
    }
}

/// The routes of the three endpoints and their single checks.
pub(crate) fn routes(router: axum::Router<Arc<Inner>>) -> axum::Router<Arc<Inner>> {
    use axum::routing::get;
    let mut router = router;
    for endpoint in [Endpoint::Healthz, Endpoint::Livez, Endpoint::Readyz] {
        let path = format!("/{}", endpoint.name());
        router = router
            .route(
                &path,
                get(move |State(inner): State<Arc<Inner>>, uri: http::Uri| {
                    all(endpoint, inner, uri)
                }),
            )
            .route(
                &format!("{path}/{{check}}"),
                get(
                    move |State(inner): State<Arc<Inner>>, Path(check): Path<String>| {
                        one(endpoint, inner, check)
                    },
                ),
            );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_verbose_and_the_excluded_checks() {
        let o = options(Some("verbose&exclude=etcd&exclude=a"));
        assert!(o.verbose);
        assert_eq!(o.exclude, ["etcd", "a"]);
        let o = options(Some("verbose=false"));
        assert!(o.verbose, "upstream counts the key, not its value");
        assert!(!options(None).verbose);
    }

    #[test]
    fn liveness_does_not_ask_the_store() {
        assert_eq!(Endpoint::Livez.checks(), [Check::Ping]);
        assert!(Endpoint::Readyz.checks().contains(&Check::Shutdown));
        assert!(!Endpoint::Healthz.checks().contains(&Check::Shutdown));
    }
}
