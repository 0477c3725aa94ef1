//! The audit log, as kube-apiserver keeps it: every request through the
//! router — from the network or from an in-process component — is put to
//! the audit policy (`policy`), and what the policy asks for is written as
//! `audit.k8s.io/v1` `Event` JSON lines (`event`) to a file rotated by size
//! or to standard output (`sink`). The layer (`layer`) sits around the
//! authorizer, so it sees the authenticated caller, and authorization
//! leaves its decision, its reason and any impersonated user in the
//! request's [`AuditSlot`]; admission's audit annotations arrive on the
//! response.
//!
//! Auditing only observes. It must never refuse or change a request (the
//! `Audit-Id` header aside) and never make one wait for the disk.

mod event;
pub(crate) mod layer;
mod policy;
mod sink;

use std::path::PathBuf;
use std::sync::Arc;

pub use event::{Event, ObjectReference, ResponseStatus};
pub use layer::AUDIT_ID_HEADER;
pub(crate) use layer::AuditSlot;
pub use policy::{Decided, Level, Policy, PolicyError, Stage, Stages};
pub use sink::{Rotation, SinkError, Target};

/// The `--audit-*` settings of the API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditConfig {
    /// Where events go: a file, or `-` for standard output; `None` keeps
    /// no log.
    pub log_path: Option<PathBuf>,
    /// Upstream's `Policy` file; without it, everything at Metadata.
    pub policy_file: Option<PathBuf>,
    /// Days a rotated file is kept (0: forever).
    pub max_age_days: u64,
    /// Rotated files kept (0: all).
    pub max_backups: usize,
    /// Size in megabytes at which the file is rotated (0: 100).
    pub max_size_mb: u64,
}

/// Why the audit log could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file is unusable.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The log could not be opened.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// The policy and the sink of a server that keeps an audit log.
#[derive(Debug)]
pub(crate) struct Auditor {
    pub policy: Policy,
    pub sink: Arc<sink::Sink>,
}

impl Auditor {
    /// The auditor the settings describe, or `None` when there is no log
    /// to write (a policy file alone is still checked, as upstream loads
    /// it).
    pub(crate) fn from_config(config: &AuditConfig) -> Result<Option<Self>, AuditError> {
        let policy = match &config.policy_file {
            Some(path) => Some(Policy::load(path)?),
            None => None,
        };
        let Some(path) = &config.log_path else {
            if policy.is_some() {
                tracing::warn!("an audit policy without --audit-log-path records nothing");
            }
            return Ok(None);
        };
        let policy = policy.unwrap_or_else(|| {
            tracing::info!("no --audit-policy-file: every request is audited at Metadata level");
            Policy::metadata_for_everything()
        });
        let target = if path.as_os_str() == "-" {
            Target::Stdout
        } else {
            Target::File {
                path: path.clone(),
                rotation: Rotation {
                    max_bytes: config.max_size_mb.saturating_mul(1024 * 1024),
                    max_backups: config.max_backups,
                    max_age_days: config.max_age_days,
                },
            }
        };
        let sink = sink::Sink::start(&target, sink::QUEUE)?;
        Ok(Some(Self { policy, sink }))
    }

    /// Writes what is queued and stops writing.
    pub(crate) async fn close(&self) {
        self.sink.close().await;
    }
}
