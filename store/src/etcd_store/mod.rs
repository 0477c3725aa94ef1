//! The etcd v3 backend: [`EtcdStore`], the [`Store`] trait on an etcd
//! cluster through `etcd-client`.
//!
//! Nothing is cached or renumbered: revisions are etcd's, a create is a
//! transaction on `create_revision == 0`, a compare-and-swap one on
//! `mod_revision`, a list one range read, a watch an etcd watch with
//! previous values, and compaction and defragmentation are etcd's own.
//! Several endpoints are one client, which balances requests over them.
//! What the store keeps locally is only what the trait's synchronous
//! methods need (`revisions.rs`), refreshed in the background
//! (`progress.rs`).

mod config;
mod convert;
mod maintenance;
mod members;
mod progress;
mod revisions;
mod watch;
mod writes;

pub use config::{ConfigError, EtcdConfig};

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Client, GetOptions, GetResponse, KvClient, MaintenanceClient, Txn, TxnResponse, WatchClient,
};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::{KeyValue, ListResult, Revision, Store, StoreError, WatchProgress, WatchStream};
use revisions::{Tracker, Unreachable};

/// gRPC's default 4 MiB response limit is far below a list of a large
/// prefix (the API server lists whole resources); etcd itself sends up to
/// 2 GiB.
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// How often a request is sent when members are unavailable.
const ATTEMPTS: usize = 3;

/// A [`Store`] on an etcd v3 cluster.
///
/// Cloning is cheap and shares the client. Any number of stores (in this
/// process or in other servers) may share one cluster: revisions, watches
/// and compare-and-swap are etcd's, so they agree.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The balanced client over the members that answer (`members.rs`).
    client: Client,
    members: members::Members,
    kv: KvClient,
    watch: WatchClient,
    maintenance: MaintenanceClient,
    config: EtcdConfig,
    tracker: Tracker,
    closed: tokio::sync::watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// A request to etcd that did not finish within the request timeout.
#[derive(Debug, thiserror::Error)]
#[error("etcd at {endpoints} did not answer within {timeout:?}")]
pub(crate) struct TimedOut {
    endpoints: String,
    timeout: std::time::Duration,
}

impl EtcdStore {
    /// Connects to the cluster and waits until it answers, for at most the
    /// configured connect timeout; an unreachable cluster is an error
    /// naming the endpoints and the last failure.
    pub async fn connect(config: EtcdConfig) -> Result<Self, StoreError> {
        let options = config.connect_options().map_err(|e| StoreError::Backend {
            context: "configuring the etcd client",
            source: Box::new(e),
        })?;
        let client = Client::connect(&config.endpoints, Some(options.clone()))
            .await
            .map_err(|e| convert::error("connecting to etcd", e))?;
        let members = members::Members::new(&config.endpoints, &options)
            .await
            .map_err(|e| convert::error("connecting to etcd", e))?;
        let inner = Arc::new(Inner {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            watch: client
                .watch_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            maintenance: client.maintenance_client(),
            tracker: Tracker::new(config.endpoint_list()),
            client,
            members,
            closed: tokio::sync::watch::channel(false).0,
            tasks: Mutex::new(Vec::new()),
            config,
        });
        let deadline = Instant::now() + inner.config.connect_timeout;
        loop {
            match inner.probe().await {
                Ok(()) => break,
                Err(e) if Instant::now() >= deadline => {
                    return Err(StoreError::Backend {
                        context: "connecting to etcd",
                        source: Box::new(Unreachable {
                            endpoints: inner.config.endpoint_list(),
                            reason: format!(
                                "no answer within {:?}; last error: {e}",
                                inner.config.connect_timeout
                            ),
                        }),
                    });
                }
                Err(e) => {
                    tracing::debug!(error = %e, "etcd not answering yet");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
        progress::spawn(&inner);
        maintenance::spawn_compactor(&inner);
        Ok(Self { inner })
    }
}

impl Inner {
    /// A range read within the request timeout, tried again (up to
    /// [`ATTEMPTS`] times) when the member it went to was unavailable: a
    /// read is safe to repeat, and another member may answer.
    async fn range(
        &self,
        context: &'static str,
        key: &[u8],
        options: GetOptions,
    ) -> Result<GetResponse, StoreError> {
        let mut attempt = 1;
        loop {
            let mut kv = self.kv.clone();
            match self.raw(kv.get(key, Some(options.clone()))).await {
                Ok(Err(e)) if attempt < ATTEMPTS && convert::worth_retrying(&e, true) => {
                    attempt += 1
                }
                outcome => return self.answer(context, outcome),
            }
        }
    }

    /// The keys a range read found, its header noted.
    fn listed(&self, response: &GetResponse) -> Result<Vec<KeyValue>, StoreError> {
        self.tracker.saw_header(response.header());
        response.kvs().iter().map(convert::key_value).collect()
    }

    /// A transaction within the request timeout, tried again only when it
    /// provably never reached etcd (the connection could not be made): a
    /// write is not repeated when it may have happened.
    async fn txn(&self, context: &'static str, txn: Txn) -> Result<TxnResponse, StoreError> {
        let mut attempt = 1;
        loop {
            let mut kv = self.kv.clone();
            match self.raw(kv.txn(txn.clone())).await {
                Ok(Err(e)) if attempt < ATTEMPTS && convert::worth_retrying(&e, false) => {
                    attempt += 1
                }
                outcome => return self.answer(context, outcome),
            }
        }
    }

    /// The store's view of a call's outcome; etcd's NOSPACE refusal becomes
    /// [`StoreError::NoSpace`]. A write that timed out may still have
    /// happened, as with any etcd client.
    fn answer<T>(
        &self,
        context: &'static str,
        outcome: Result<Result<T, etcd_client::Error>, TimedOut>,
    ) -> Result<T, StoreError> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if convert::is_no_space(&e) => Err(self.tracker.no_space()),
            Ok(Err(e)) => Err(convert::error(context, e)),
            Err(timed_out) => Err(StoreError::Backend {
                context,
                source: Box::new(timed_out),
            }),
        }
    }

    /// Runs one unary call within the request timeout, keeping etcd's error.
    async fn raw<T>(
        &self,
        request: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<Result<T, etcd_client::Error>, TimedOut> {
        let timeout = self.config.request_timeout;
        tokio::time::timeout(timeout, request)
            .await
            .map_err(|_| TimedOut {
                endpoints: self.config.endpoint_list(),
                timeout,
            })
    }

    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    fn refuse_if_closed(&self) -> Result<(), StoreError> {
        if self.is_closed() {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for EtcdStore {
    fn current_revision(&self) -> Revision {
        self.inner.tracker.current()
    }

    fn compact_revision(&self) -> Revision {
        self.inner.tracker.compact()
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let inner = &self.inner;
        let response = inner
            .range("reading a key from etcd", key.as_bytes(), GetOptions::new())
            .await?;
        inner.tracker.saw_header(response.header());
        response.kvs().first().map(convert::key_value).transpose()
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListResult, StoreError> {
        let inner = &self.inner;
        let Some((start, end)) = convert::list_range(prefix, start_after) else {
            return Ok(ListResult {
                items: Vec::new(),
                revision: inner.tracker.current(),
                more: false,
            });
        };
        let mut options = GetOptions::new().with_range(end);
        if limit > 0 {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        // One range read: the page and `more` are one snapshot of etcd.
        let response = inner.range("listing keys in etcd", &start, options).await?;
        let items = inner.listed(&response)?;
        let revision = response
            .header()
            .map_or(inner.tracker.current(), |h| convert::revision(h.revision()));
        Ok(ListResult {
            items,
            revision,
            more: response.more(),
        })
    }

    async fn list_at(&self, prefix: &str, revision: Revision) -> Result<ListResult, StoreError> {
        let inner = &self.inner;
        let Some((start, end)) = convert::list_range(prefix, None) else {
            return Ok(ListResult {
                items: Vec::new(),
                revision,
                more: false,
            });
        };
        let options = GetOptions::new()
            .with_range(end)
            .with_revision(i64::try_from(revision).unwrap_or(i64::MAX));
        let mut kv = inner.kv.clone();
        let response = match inner.raw(kv.get(start, Some(options))).await {
            Ok(Err(e)) if convert::is_compacted(&e) => {
                return Err(StoreError::Compacted {
                    requested: revision,
                    compact_revision: inner.tracker.compact(),
                });
            }
            outcome => inner.answer("listing keys in etcd at a revision", outcome)?,
        };
        let items = inner.listed(&response)?;
        Ok(ListResult {
            items,
            revision,
            more: false,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        self.inner.refuse_if_closed()?;
        writes::create(&self.inner, key, value).await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        self.inner.refuse_if_closed()?;
        writes::update(&self.inner, key, value, expected_mod_revision).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        self.inner.refuse_if_closed()?;
        writes::delete(&self.inner, key, expected_mod_revision).await
    }

    /// No progress: the etcd here (3.4) predates the progress
    /// notifications upstream trusts, so consistent reads go to etcd.
    fn watch_with_progress(
        &self,
        prefix: &str,
        from_revision: Revision,
    ) -> Result<(WatchStream, Option<WatchProgress>), StoreError> {
        self.inner.refuse_if_closed()?;
        Ok((watch::open(&self.inner, prefix, from_revision)?, None))
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        maintenance::compact(&self.inner, revision).await
    }

    async fn defragment(&self) -> Result<(), StoreError> {
        maintenance::defragment(&self.inner).await
    }

    /// Stops the background work and ends every watch stream. Every
    /// acknowledged write is already durable in etcd; nothing is flushed.
    async fn close(&self) -> Result<(), StoreError> {
        self.inner.closed.send_replace(true);
        let tasks = std::mem::take(&mut *self.inner.tasks.lock());
        for task in tasks {
            // They return at the close signal; a probe in flight is dropped.
            task.abort();
            let _ = task.await;
        }
        Ok(())
    }

    fn health(&self) -> Result<(), StoreError> {
        self.inner.refuse_if_closed()?;
        self.inner.tracker.health()
    }
}
