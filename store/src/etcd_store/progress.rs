//! The background probe that keeps the tracker (`revisions.rs`) current
//! when this store itself is idle: what other servers wrote, compacted or
//! alarmed.
//!
//! Every interval it asks etcd two small questions. A count-only read of
//! one key *at the known compact revision* answers with etcd's current
//! revision in its header, and fails with "compacted" exactly when someone
//! compacted further (etcd refuses reads below its compact revision); then a
//! binary search of such reads finds the new compact revision, since etcd
//! reports it nowhere else. An alarm list says whether NOSPACE is raised.
//! A failure of either marks the store unhealthy until a probe succeeds.
//!
//! Why not a progress-notifying watch: etcd 3.4 sends progress only every
//! ten minutes or on request, so it would be polled all the same, and it
//! says nothing of compaction or alarms.

use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmType, GetOptions};

use super::Inner;
use super::convert::{is_compacted, wire};
use super::revisions::Health;
use crate::Revision;

/// How long a probe waits for an answer: its reads need no disk write in
/// etcd, so a member slower than this is as good as gone for readiness.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A key nothing writes: probes read it for the header and the revision
/// check only, so its value never matters.
const PROBE_KEY: &[u8] = b"\0skiff-progress-probe";

pub(super) fn spawn(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let interval = inner.config.progress_interval;
    let mut closed = inner.closed.subscribe();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = closed.wait_for(|closed| *closed) => return,
                _ = tokio::time::sleep(interval) => {}
            }
            if !probe_once(&weak).await {
                return;
            }
        }
    });
    inner.tasks.lock().push(task);
}

/// One probe; false once the store is gone.
async fn probe_once(weak: &Weak<Inner>) -> bool {
    let Some(inner) = weak.upgrade() else {
        return false;
    };
    if let Err(e) = inner.probe().await {
        tracing::warn!(error = %e, endpoints = %inner.config.endpoint_list(), "etcd probe failed");
    }
    true
}

/// A probe failure, already recorded as the store's health.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ProbeError(String);

impl Inner {
    /// Refreshes the current and compact revisions and the health.
    pub(crate) async fn probe(&self) -> Result<(), ProbeError> {
        self.members.check(&self.client, PROBE_TIMEOUT).await;
        let result = self.probe_revisions().await;
        let result = match result {
            Ok(()) => self.probe_alarms().await,
            Err(e) => Err(e),
        };
        match &result {
            Ok(health) => self.tracker.set_health(health.clone()),
            Err(reason) => self.tracker.set_health(Health::Unreachable(reason.clone())),
        }
        result.map(|_| ()).map_err(ProbeError)
    }

    /// Runs one probe request within [`PROBE_TIMEOUT`].
    async fn within<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<Result<T, etcd_client::Error>, String> {
        tokio::time::timeout(PROBE_TIMEOUT, request)
            .await
            .map_err(|_| format!("no answer within {PROBE_TIMEOUT:?}"))
    }

    /// Reads the probe key at `revision`: `Ok(true)` when etcd still has
    /// that revision, `Ok(false)` when it is compacted away.
    async fn readable_at(&self, revision: Revision) -> Result<bool, String> {
        let options = GetOptions::new()
            .with_count_only()
            .with_revision(wire(revision.max(1)));
        match self
            .within(self.kv.clone().get(PROBE_KEY, Some(options)))
            .await
        {
            Ok(Ok(response)) => {
                self.tracker.saw_header(response.header());
                Ok(true)
            }
            Ok(Err(e)) if is_compacted(&e) => Ok(false),
            Ok(Err(e)) => Err(super::convert::EtcdFailure::from(e).to_string()),
            Err(timed_out) => Err(timed_out),
        }
    }

    async fn probe_revisions(&self) -> Result<(), String> {
        let known = self.tracker.compact();
        if self.readable_at(known).await? {
            return Ok(());
        }
        // Compacted past what we knew; the newest revision is readable
        // (this read also brings the current revision up to date).
        let latest = self
            .within(
                self.kv
                    .clone()
                    .get(PROBE_KEY, Some(GetOptions::new().with_count_only())),
            )
            .await?
            .map_err(|e| super::convert::EtcdFailure::from(e).to_string())?;
        self.tracker.saw_header(latest.header());
        let (mut unreadable, mut readable) = (known.max(1), self.tracker.current());
        while readable > unreadable + 1 {
            let middle = unreadable + (readable - unreadable) / 2;
            if self.readable_at(middle).await? {
                readable = middle;
            } else {
                unreadable = middle;
            }
        }
        tracing::debug!(
            compact_revision = readable,
            "etcd was compacted by another client"
        );
        self.tracker.compacted(readable);
        Ok(())
    }

    async fn probe_alarms(&self) -> Result<Health, String> {
        let alarms = self
            .within(
                self.maintenance
                    .clone()
                    .alarm(AlarmAction::Get, AlarmType::None, None),
            )
            .await?
            .map_err(|e| super::convert::EtcdFailure::from(e).to_string())?;
        self.tracker.saw_header(alarms.header());
        let no_space = alarms
            .alarms()
            .iter()
            .any(|member| member.alarm() == AlarmType::Nospace);
        Ok(if no_space {
            Health::NoSpace
        } else {
            Health::Ok
        })
    }
}
