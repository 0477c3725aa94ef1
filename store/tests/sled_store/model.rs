//! Property test: random operation sequences behave exactly like a simple
//! in-memory model of etcd semantics, including watch history with previous
//! values, compaction, paginated lists, and a reopen at the end.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use skiff_store::{EventKind, KeyValue, Store, StoreError};

use super::common::{open, take, tmp};

#[derive(Debug, Clone)]
enum Expect {
    Any,
    Current,
    Stale,
}

#[derive(Debug, Clone)]
enum Op {
    Create(usize, u8),
    Update(usize, u8, Expect),
    Delete(usize, Expect),
    Compact(u8),
    List(usize, usize),
}

const KEYS: [&str; 6] = ["a", "a/1", "a/2", "b", "b/1", "c"];
const PREFIXES: [&str; 4] = ["", "a", "a/", "b"];

fn expect() -> impl Strategy<Value = Expect> {
    prop_oneof![
        Just(Expect::Any),
        Just(Expect::Current),
        Just(Expect::Stale)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS.len(), any::<u8>()).prop_map(|(k, v)| Op::Create(k, v)),
        4 => (0..KEYS.len(), any::<u8>(), expect()).prop_map(|(k, v, e)| Op::Update(k, v, e)),
        2 => (0..KEYS.len(), expect()).prop_map(|(k, e)| Op::Delete(k, e)),
        1 => (0u8..6).prop_map(Op::Compact),
        1 => (0..PREFIXES.len(), 0usize..4).prop_map(|(p, l)| Op::List(p, l)),
    ]
}

/// What the model predicts for a watch event.
#[derive(Debug, Clone, PartialEq)]
struct Change {
    kind: EventKind,
    kv: KeyValue,
    prev: Option<KeyValue>,
}

#[derive(Default)]
struct Model {
    revision: u64,
    compact: u64,
    live: BTreeMap<String, KeyValue>,
    changes: Vec<Change>,
}

impl Model {
    fn expected_mod(&self, key: &str, expect: &Expect) -> Option<u64> {
        let current = self.live.get(key).map_or(0, |kv| kv.mod_revision);
        match expect {
            Expect::Any => None,
            Expect::Current => Some(current),
            Expect::Stale => Some(current + 1000),
        }
    }

    /// The value a write to `key` expecting `expected` replaces, when the
    /// model lets it through; otherwise checks that the store refused it as
    /// etcd does (NotFound for a missing key, Conflict for a stale
    /// expectation) and returns `None`.
    fn admitted<T: std::fmt::Debug>(
        &self,
        key: &str,
        expected: Option<u64>,
        got: &Result<T, StoreError>,
    ) -> Result<Option<KeyValue>, TestCaseError> {
        match self.live.get(key) {
            None => {
                prop_assert!(matches!(got, Err(StoreError::NotFound { .. })), "{got:?}")
            }
            Some(prev) if expected.is_some_and(|e| e != prev.mod_revision) => {
                prop_assert!(matches!(got, Err(StoreError::Conflict { .. })), "{got:?}")
            }
            Some(prev) => return Ok(Some(prev.clone())),
        }
        Ok(None)
    }

    /// `kv` written over `prev` (none: created).
    fn put(&mut self, kv: KeyValue, prev: Option<KeyValue>) {
        self.changes.push(Change {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev,
        });
        self.live.insert(kv.key.clone(), kv);
    }
}

fn value(v: u8) -> Bytes {
    Bytes::from(vec![v; 1 + v as usize % 7])
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tmp();
    let store = open(dir.path());
    let mut model = Model {
        revision: 1,
        ..Model::default()
    };
    for op in ops {
        match op {
            Op::Create(k, v) => {
                let key = KEYS[k];
                let got = store.create(key, value(v)).await;
                if model.live.contains_key(key) {
                    prop_assert!(
                        matches!(got, Err(StoreError::AlreadyExists { .. })),
                        "{got:?}"
                    );
                } else {
                    model.revision += 1;
                    let kv = KeyValue {
                        key: key.into(),
                        value: value(v),
                        create_revision: model.revision,
                        mod_revision: model.revision,
                        version: 1,
                    };
                    prop_assert_eq!(got?, kv.clone());
                    model.put(kv, None);
                }
            }
            Op::Update(k, v, expect) => {
                let key = KEYS[k];
                let expected = model.expected_mod(key, &expect);
                let got = store.update(key, value(v), expected).await;
                if let Some(prev) = model.admitted(key, expected, &got)? {
                    model.revision += 1;
                    let kv = KeyValue {
                        value: value(v),
                        mod_revision: model.revision,
                        version: prev.version + 1,
                        ..prev.clone()
                    };
                    prop_assert_eq!(got?, kv.clone());
                    model.put(kv, Some(prev));
                }
            }
            Op::Delete(k, expect) => {
                let key = KEYS[k];
                let expected = model.expected_mod(key, &expect);
                let got = store.delete(key, expected).await;
                if let Some(prev) = model.admitted(key, expected, &got)? {
                    model.revision += 1;
                    let got = got?;
                    prop_assert_eq!(&got.value, &prev.value);
                    prop_assert_eq!(got.mod_revision, model.revision);
                    let kv = KeyValue {
                        key: key.into(),
                        value: Bytes::new(),
                        create_revision: 0,
                        mod_revision: model.revision,
                        version: 0,
                    };
                    model.changes.push(Change {
                        kind: EventKind::Delete,
                        kv,
                        prev: Some(prev),
                    });
                    model.live.remove(key);
                }
            }
            Op::Compact(back) => {
                let target = model.revision.saturating_sub(back as u64);
                store.compact(target).await?;
                model.compact = model.compact.max(target);
                prop_assert_eq!(store.compact_revision(), model.compact);
            }
            Op::List(p, limit) => {
                let prefix = PREFIXES[p];
                let expected: Vec<KeyValue> = model
                    .live
                    .values()
                    .filter(|kv| kv.key.starts_with(prefix))
                    .cloned()
                    .collect();
                let mut got = Vec::new();
                let mut after: Option<String> = None;
                loop {
                    let page = store.list(prefix, after.as_deref(), limit).await?;
                    prop_assert_eq!(page.revision, model.revision);
                    got.extend(page.items.iter().cloned());
                    if !page.more {
                        break;
                    }
                    after = page.items.last().map(|kv| kv.key.clone());
                }
                prop_assert_eq!(got, expected);
            }
        }
        prop_assert_eq!(store.current_revision(), model.revision);
    }
    check(&store, &model).await?;
    store.close().await?;
    drop(store);
    let reopened = open(dir.path());
    check(&reopened, &model).await
}

/// Every live value and the retained history match the model.
async fn check(store: &skiff_store::SledStore, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(store.current_revision(), model.revision);
    prop_assert_eq!(store.compact_revision(), model.compact);
    for key in KEYS {
        prop_assert_eq!(store.get(key).await?, model.live.get(key).cloned());
    }
    let retained: Vec<&Change> = model
        .changes
        .iter()
        .filter(|c| c.kv.mod_revision > model.compact)
        .collect();
    let mut watch = store.watch("", model.compact)?;
    let events = take(&mut watch, retained.len()).await;
    for (event, change) in events.iter().zip(retained) {
        prop_assert_eq!(event.kind, change.kind);
        prop_assert_eq!(&event.kv, &change.kv);
        prop_assert_eq!(&event.prev, &change.prev);
    }
    if model.compact > 0 {
        prop_assert!(
            matches!(
                store.watch("", model.compact - 1),
                Err(StoreError::Compacted { .. })
            ),
            "a watch before the compact revision fails"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_store_behaves_like_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run(ops))?;
    }
}
