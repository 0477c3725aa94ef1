//! The admin endpoints behind `skiff snapshot` (k3s's `etcd-snapshot`):
//! list ([`SNAPSHOTS_PATH`], GET), save (POST, `?name=`), delete
//! (`SNAPSHOTS_PATH/<name>`, DELETE) and prune ([`PRUNE_PATH`], POST,
//! `?name=&retention=`). A snapshot holds every Secret and the cluster CA's
//! key, so these are non-resource paths the authorization middleware has
//! decided before they run: only `cluster-admin` and `system:masters` hold
//! `get`/`post`/`delete` on them. They answer with JSON of the types here or
//! a Kubernetes `Status`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use skiff_store::snapshot::{SnapshotDir, SnapshotError, SnapshotFile};

use crate::server::Inner;
use crate::status::{ApiError, json_response};

/// Lists (GET) and saves (POST) snapshots.
pub const SNAPSHOTS_PATH: &str = "/v1-skiff/snapshots";
/// Deletes the oldest snapshots of a name beyond a retention (POST).
pub const PRUNE_PATH: &str = "/v1-skiff/snapshot-prune";
/// The name of on-demand snapshots when none is given, as k3s's.
pub const DEFAULT_ON_DEMAND_NAME: &str = "on-demand";

/// One snapshot file on the server, as `skiff snapshot ls` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// The snapshot's name.
    pub name: String,
    /// `file://` URL of the file on the server.
    pub location: String,
    /// The file's size in bytes.
    pub size: u64,
    /// RFC 3339, UTC.
    pub created: String,
}

/// The answer of a list or a prune.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotList {
    /// The snapshots listed or pruned.
    pub items: Vec<SnapshotInfo>,
}

/// Query of a save or prune.
#[derive(Debug, Deserialize)]
pub(crate) struct NameQuery {
    name: Option<String>,
    retention: Option<usize>,
}

impl From<SnapshotFile> for SnapshotInfo {
    fn from(file: SnapshotFile) -> Self {
        let created = i64::try_from(file.created)
            .ok()
            .and_then(|s| jiff::Timestamp::from_second(s).ok())
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        Self {
            name: file.name,
            location: format!("file://{}", file.path.display()),
            size: file.size,
            created,
        }
    }
}

impl From<SnapshotError> for ApiError {
    fn from(e: SnapshotError) -> Self {
        match e {
            SnapshotError::InvalidName { .. } => ApiError::BadRequest(e.to_string()),
            SnapshotError::NotFound { name, .. } => ApiError::NotFound {
                resource: "snapshots".into(),
                group: String::new(),
                name,
            },
            SnapshotError::Store(skiff_store::StoreError::Closed) => {
                ApiError::ServiceUnavailable("the storage is shutting down".into())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

fn answer<T: Serialize>(result: Result<T, ApiError>) -> Response {
    match result
        .and_then(|body| serde_json::to_value(&body).map_err(|e| ApiError::Internal(e.to_string())))
    {
        Ok(body) => json_response(StatusCode::OK, &body),
        Err(e) => e.into_response(),
    }
}

/// The server's snapshot directory, or why there is none.
fn snapshot_dir(inner: &Inner) -> Result<&SnapshotDir, ApiError> {
    inner
        .config
        .snapshots
        .as_deref()
        .ok_or_else(|| ApiError::BadRequest("this server keeps no snapshots".into()))
}

/// `GET /v1-skiff/snapshots`.
pub(crate) async fn list_handler(State(inner): State<Arc<Inner>>) -> Response {
    answer(snapshot_dir(&inner).and_then(|dir| {
        Ok(SnapshotList {
            items: dir.list()?.into_iter().map(SnapshotInfo::from).collect(),
        })
    }))
}

/// `POST /v1-skiff/snapshots?name=N`.
pub(crate) async fn save_handler(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<NameQuery>,
) -> Response {
    let name = query.name.as_deref().unwrap_or(DEFAULT_ON_DEMAND_NAME);
    answer(match snapshot_dir(&inner) {
        Ok(dir) => dir
            .save(name)
            .await
            .map(SnapshotInfo::from)
            .map_err(ApiError::from),
        Err(e) => Err(e),
    })
}

/// `DELETE /v1-skiff/snapshots/<name>`.
pub(crate) async fn delete_handler(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
) -> Response {
    answer(
        snapshot_dir(&inner)
            .and_then(|dir| Ok(dir.delete(&name)?))
            .map(|()| SnapshotList::default()),
    )
}

/// `POST /v1-skiff/snapshot-prune?name=N&retention=R`: answers the deleted
/// snapshots (only their names are known by then).
pub(crate) async fn prune_handler(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<NameQuery>,
) -> Response {
    let name = query.name.as_deref().unwrap_or(DEFAULT_ON_DEMAND_NAME);
    let retention = query.retention.unwrap_or(inner.config.snapshot_retention);
    let pruned = match snapshot_dir(&inner) {
        Ok(dir) => dir.prune(name, retention).await.map_err(ApiError::from),
        Err(e) => Err(e),
    };
    answer(pruned.map(|deleted| {
        SnapshotList {
            items: deleted
                .into_iter()
                .map(|name| SnapshotInfo {
                    name,
                    location: String::new(),
                    size: 0,
                    created: String::new(),
                })
                .collect(),
        }
    }))
}
