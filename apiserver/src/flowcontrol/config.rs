//! The configuration requests are classified and dispatched by, built from
//! the FlowSchema and PriorityLevelConfiguration watch caches and rebuilt
//! only when one of them moved on. Each limited level gets its share of the
//! server's total seats (`--max-requests-inflight` plus
//! `--max-mutating-requests-inflight`) in proportion to its
//! `nominalConcurrencyShares`, rounded up, at least one. A level whose
//! queuing is unchanged keeps its seats and queues across rebuilds, so a
//! configuration change loses no waiting request. Borrowing between levels
//! (`lendablePercent`, `borrowingLimitPercent`) is not done: each level has
//! its nominal limit.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;
use skiff_store::Revision;

use super::classify::{self, Schema};
use super::definition::CATCH_ALL;
use super::dispatch::{Level, Queuing};
use crate::authz::Attributes;
use crate::watch_cache::WatchCache;

/// Where one request goes.
#[derive(Debug, Clone)]
pub(crate) struct Classification {
    /// The FlowSchema's uid (the `X-Kubernetes-PF-FlowSchema-UID` header).
    pub schema_uid: String,
    /// The priority level's uid (the `X-Kubernetes-PF-PriorityLevel-UID` header).
    pub level_uid: String,
    /// The FlowSchema's and the level's names (the metrics' labels).
    pub schema_name: String,
    /// The priority level's name.
    pub level_name: String,
    /// The limited level, `None` for an exempt one.
    pub level: Option<Arc<Level>>,
    /// The flow within the level.
    pub flow: String,
}

#[derive(Debug)]
struct LevelEntry {
    uid: String,
    level: Option<Arc<Level>>,
}

/// One configuration, as of two cache revisions.
#[derive(Debug, Default)]
struct Config {
    revisions: Option<(Revision, Revision)>,
    schemas: Vec<Schema>,
    levels: HashMap<String, LevelEntry>,
}

impl Config {
    fn build(
        revisions: (Revision, Revision),
        schema_objects: impl Iterator<Item = Arc<Value>>,
        level_objects: impl Iterator<Item = Arc<Value>>,
        total_seats: usize,
        previous: &Config,
    ) -> Self {
        let mut limited = Vec::new();
        let mut levels = HashMap::new();
        for object in level_objects {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let uid = object["metadata"]["uid"].as_str().unwrap_or("").to_string();
            let spec = &object["spec"];
            if spec["type"] == "Limited" {
                let shares = spec["limited"]["nominalConcurrencyShares"]
                    .as_u64()
                    .unwrap_or(30);
                let response = &spec["limited"]["limitResponse"];
                let queuing = (response["type"] == "Queue").then(|| {
                    let q = &response["queuing"];
                    let field = |k: &str, d: u64| q[k].as_u64().unwrap_or(d) as usize;
                    Queuing {
                        queues: field("queues", 64),
                        hand_size: field("handSize", 8),
                        queue_length_limit: field("queueLengthLimit", 50),
                    }
                });
                limited.push((name.clone(), shares, queuing));
            }
            levels.insert(name, LevelEntry { uid, level: None });
        }
        let total_shares: u64 = limited.iter().map(|(_, shares, _)| shares).sum();
        for (name, shares, queuing) in limited {
            let limit = if total_shares == 0 {
                1
            } else {
                (total_seats as u64 * shares).div_ceil(total_shares) as usize
            };
            let reused = previous
                .levels
                .get(&name)
                .and_then(|e| e.level.clone())
                .filter(|l| l.queuing() == queuing);
            let level = match reused {
                Some(level) => {
                    level.set_limit(limit);
                    level
                }
                None => Level::new(limit, queuing),
            };
            if let Some(entry) = levels.get_mut(&name) {
                entry.level = Some(level);
            }
        }
        let mut schemas: Vec<Schema> = schema_objects.map(|o| Schema::from_object(&o)).collect();
        classify::sort(&mut schemas);
        Self {
            revisions: Some(revisions),
            schemas,
            levels,
        }
    }

    fn classify(&self, attrs: &Attributes) -> Option<Classification> {
        let matched = self
            .schemas
            .iter()
            .filter(|s| self.levels.contains_key(&s.level))
            .find(|s| s.matches(attrs));
        let (schema_uid, schema_name, level_name, flow) = match matched {
            Some(schema) => (
                schema.uid.clone(),
                schema.name.as_str(),
                schema.level.as_str(),
                schema.flow(attrs),
            ),
            // Nothing matched: upstream's catch-all level, whatever the
            // schemas say.
            None => (
                String::new(),
                CATCH_ALL,
                CATCH_ALL,
                format!("{CATCH_ALL}\u{0}{}", attrs.user.name),
            ),
        };
        let entry = self.levels.get(level_name)?;
        Some(Classification {
            schema_uid,
            level_uid: entry.uid.clone(),
            level: entry.level.clone(),
            schema_name: schema_name.to_string(),
            level_name: level_name.to_string(),
            flow,
        })
    }
}

/// The live configuration over the two watch caches.
pub(crate) struct FlowControl {
    schemas: Arc<WatchCache>,
    levels: Arc<WatchCache>,
    total_seats: usize,
    current: RwLock<Arc<Config>>,
}

impl std::fmt::Debug for FlowControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowControl")
            .field("total_seats", &self.total_seats)
            .finish()
    }
}

impl FlowControl {
    /// Follows `schemas` and `levels`, sharing `total_seats` among the
    /// limited levels.
    pub(crate) fn new(
        schemas: Arc<WatchCache>,
        levels: Arc<WatchCache>,
        total_seats: usize,
    ) -> Self {
        Self {
            schemas,
            levels,
            total_seats,
            current: RwLock::new(Arc::new(Config::default())),
        }
    }

    fn config(&self) -> Arc<Config> {
        let wanted = (self.schemas.revision(), self.levels.revision());
        {
            let current = self.current.read();
            if current.revisions == Some(wanted) {
                return current.clone();
            }
        }
        let mut current = self.current.write();
        if current.revisions == Some(wanted) {
            return current.clone();
        }
        let built = Config::build(
            wanted,
            self.schemas.snapshot().objects.values().map(|o| o.value()),
            self.levels.snapshot().objects.values().map(|o| o.value()),
            self.total_seats,
            &current,
        );
        *current = Arc::new(built);
        current.clone()
    }

    /// Where the request goes; `None` while no configuration exists yet
    /// (only during the server's own start-up writes).
    pub(crate) fn classify(&self, attrs: &Attributes) -> Option<Classification> {
        self.config().classify(attrs)
    }
}
