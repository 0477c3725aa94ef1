//! The backends under test, each fresh and empty per check, and helpers
//! for reading watch streams.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use skiff_store::testing::EtcdProcess;
use skiff_store::{EtcdConfig, EtcdStore, SledConfig, SledStore, Store, WatchStream};

pub use crate::tmpfs::tmp;

/// A store and whatever must outlive it (its directory, its etcd).
pub struct Fixture {
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
    _etcd: Option<EtcdProcess>,
}

/// The embedded store, without background compaction so checks control
/// history.
pub fn sled() -> Fixture {
    let dir = tmp();
    let store = SledStore::open(SledConfig::new(dir.path().join("db")).compaction(None))
        .expect("open the sled store");
    Fixture {
        store: Arc::new(store),
        _dir: dir,
        _etcd: None,
    }
}

/// A new etcd server of the check's own and a store on it.
pub async fn etcd() -> Fixture {
    let dir = tmp();
    let etcd = start_etcd(dir.path());
    let store = connect(etcd.endpoint()).await;
    Fixture {
        store: Arc::new(store),
        _dir: dir,
        _etcd: Some(etcd),
    }
}

/// Starts an etcd in `dir`, failing the test loudly when it cannot.
pub fn start_etcd(dir: &std::path::Path) -> EtcdProcess {
    EtcdProcess::start(dir).unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"))
}

/// A store on `endpoint` as the checks want it: no background compaction,
/// a quick background probe.
pub async fn connect(endpoint: &str) -> EtcdStore {
    EtcdStore::connect(config(endpoint))
        .await
        .unwrap_or_else(|e| panic!("connecting to the test etcd at {endpoint}: {e}"))
}

pub fn config(endpoint: &str) -> EtcdConfig {
    EtcdConfig::new([endpoint])
        .compaction(None)
        .progress_interval(Duration::from_millis(100))
        .connect_timeout(Duration::from_secs(10))
}

pub fn v(s: &str) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(s.as_bytes())
}

pub use skiff_store::testing::{next_event as next, take_events as take};

/// Asserts that nothing more arrives within a short while.
pub async fn assert_quiet(stream: &mut WatchStream) {
    let more = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(more.is_err(), "unexpected watch item: {more:?}");
}
