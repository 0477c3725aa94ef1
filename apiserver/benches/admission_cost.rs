//! What the admission chain and the audit log cost a create, as a ratio:
//! the same Pod creates through the router (in-process kube clients, several
//! concurrent tasks) on two API servers in one process, each on its own sled
//! store. On the first, the pods' namespace enforces, warns and audits Pod
//! Security `restricted`, holds a ResourceQuota that counts pods, CPU
//! requests and memory limits, and every request is written to an audit log
//! at `Metadata`. On the second, the namespace has no Pod Security labels and
//! no quota, and there is no audit log (the plugins still run; they find
//! nothing to do). The two take turns in rounds, alternating who goes first,
//! so machine noise hits both alike.
//!
//! Run: `cargo bench -p skiff-apiserver --bench admission_cost`
//! (env `BENCH_SCALE=0.1` for a quick smoke run, `BENCH_ROUNDS` for more rounds; `BENCH_PARTS=quota` or any
//! comma-separated subset of `podsecurity,quota,audit` turns on only those,
//! to see what each costs).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod support;

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::{SledConfig, SledStore, Store};

use crate::support::scale;

const CONCURRENCY: usize = 16;
/// Rounds each server runs (env `BENCH_ROUNDS` overrides).
const ROUNDS: usize = 6;
const NAMESPACE: &str = "bench";

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// A pod `restricted` admits, with the requests and limits the quota counts.
fn pod(name: &str) -> BenchResult<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "app",
                "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    }))?)
}

/// Which of the measured features the "on" server has.
#[derive(Clone, Copy)]
struct Parts {
    pod_security: bool,
    quota: bool,
    audit: bool,
}

impl Parts {
    const NONE: Parts = Parts {
        pod_security: false,
        quota: false,
        audit: false,
    };

    fn from_env() -> Self {
        let parts =
            std::env::var("BENCH_PARTS").unwrap_or_else(|_| "podsecurity,quota,audit".into());
        let has = |part: &str| parts.split(',').any(|p| p.trim() == part);
        Parts {
            pod_security: has("podsecurity"),
            quota: has("quota"),
            audit: has("audit"),
        }
    }

    fn describe(&self) -> String {
        let mut on = Vec::new();
        if self.pod_security {
            on.push("PodSecurity restricted");
        }
        if self.quota {
            on.push("ResourceQuota");
        }
        if self.audit {
            on.push("audit Metadata");
        }
        on.join(" + ")
    }
}

/// One API server, its store, and an admin client on it.
struct Cluster {
    api: ApiServer,
    store: Arc<dyn Store>,
    client: kube::Client,
}

impl Cluster {
    async fn start(dir: &Path, parts: Parts) -> BenchResult<Self> {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(SledConfig::new(dir.join("db")))?);
        let mut config = ApiServerConfig::default();
        if parts.audit {
            let policy = dir.join("audit-policy.yaml");
            std::fs::write(
                &policy,
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
            )?;
            config.audit.policy_file = Some(policy);
            config.audit.log_path = Some(dir.join("audit.log"));
        }
        let api = ApiServer::new(store.clone(), config).await?;
        let client = skiff_apiserver::inprocess::client(
            api.router(),
            UserInfo::new("bench-admin", ["system:masters".to_string()]),
        );
        let mut labels = serde_json::Map::new();
        if parts.pod_security {
            for mode in ["enforce", "warn", "audit"] {
                labels.insert(
                    format!("pod-security.kubernetes.io/{mode}"),
                    json!("restricted"),
                );
            }
        }
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": NAMESPACE, "labels": labels}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        if parts.quota {
            let quota: ResourceQuota = serde_json::from_value(json!({
                "metadata": {"name": "compute"},
                "spec": {"hard": {
                    "pods": "1000000",
                    "requests.cpu": "100000",
                    "requests.memory": "1000Ti",
                    "limits.memory": "1000Ti",
                    "count/configmaps": "1000"
                }}
            }))?;
            Api::<ResourceQuota>::namespaced(client.clone(), NAMESPACE)
                .create(&PostParams::default(), &quota)
                .await?;
        }
        Ok(Self { api, store, client })
    }

    /// Creates `total` pods named `<prefix>-<i>` on [`CONCURRENCY`] tasks;
    /// returns creates per second.
    async fn creates(&self, prefix: &str, total: usize) -> BenchResult<f64> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NAMESPACE);
        let prefix_owned = prefix.to_string();
        let run = support::concurrently(CONCURRENCY, total, pods, move |pods, i| {
            let pod = pod(&format!("{prefix_owned}-{i}")).ok();
            async move {
                match pod {
                    Some(pod) => pods.create(&PostParams::default(), &pod).await.is_ok(),
                    None => false,
                }
            }
        })
        .await;
        let rate = total as f64 / run.took.as_secs_f64();
        match run.failed {
            0 => Ok(rate),
            n => Err(format!("{prefix}: {n} of {total} creates failed").into()),
        }
    }

    async fn stop(self) -> BenchResult<()> {
        self.api.shutdown();
        self.store.close().await?;
        Ok(())
    }
}

/// CPU seconds this process has used (user + system), from
/// `/proc/self/stat`: its 14th and 15th fields, in clock ticks of 1/100 s.
fn cpu_seconds() -> BenchResult<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may hold spaces; the fields after its
    // closing parenthesis start at field 3.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> BenchResult<f64> {
        Ok(fields
            .get(i)
            .ok_or("short /proc/self/stat")?
            .parse::<f64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// Runs one round on `cluster`: creates per second and CPU microseconds per
/// create (the whole process's, background threads included).
async fn measured(cluster: &Cluster, prefix: &str, creates: usize) -> BenchResult<(f64, f64)> {
    let cpu = cpu_seconds()?;
    let rate = cluster.creates(prefix, creates).await?;
    Ok((rate, (cpu_seconds()? - cpu) * 1e6 / creates as f64))
}

fn mean(rates: &[f64]) -> f64 {
    rates.iter().sum::<f64>() / rates.len().max(1) as f64
}

#[tokio::main]
async fn main() -> BenchResult<()> {
    let (dir_on, dir_off) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let parts = Parts::from_env();
    let on = Cluster::start(dir_on.path(), parts).await?;
    let off = Cluster::start(dir_off.path(), Parts::NONE).await?;
    let creates = scale(2_000);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    let (mut rates_on, mut rates_off) = (Vec::new(), Vec::new());
    let (mut cpu_on, mut cpu_off) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternating who goes first evens out warm-up and drift.
        let (with, without) = if r % 2 == 0 {
            let with = measured(&on, &format!("on-{r}"), creates).await?;
            (with, measured(&off, &format!("off-{r}"), creates).await?)
        } else {
            let without = measured(&off, &format!("off-{r}"), creates).await?;
            (measured(&on, &format!("on-{r}"), creates).await?, without)
        };
        rates_on.push(with.0);
        cpu_on.push(with.1);
        rates_off.push(without.0);
        cpu_off.push(without.1);
        eprintln!(
            "round {r}: pod creates/s with {} {:.0} ({:.0} us CPU each), without {:.0} ({:.0} us)",
            parts.describe(),
            with.0,
            with.1,
            without.0,
            without.1
        );
    }
    let audit_lines = std::fs::read_to_string(dir_on.path().join("audit.log"))
        .map(|log| log.lines().count())
        .unwrap_or(0);
    on.stop().await?;
    off.stop().await?;
    let (mean_on, mean_off) = (mean(&rates_on), mean(&rates_off));
    // Each round's pair ran back to back, so its ratio is the least noisy
    // figure; the median of those resists a round another process spoiled.
    let mut ratios: Vec<f64> = rates_on
        .iter()
        .zip(&rates_off)
        .map(|(on, off)| on / off)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    let (cpu_with, cpu_without) = (mean(&cpu_on), mean(&cpu_off));
    println!(
        "admission_cost: {CONCURRENCY} concurrent clients, {rounds} rounds of {creates} pod creates: \
         creates/s with {} {mean_on:.0}, without {mean_off:.0} (on/off of the means {:.3}; \
         median of the rounds' on/off {median:.3}, cost {:.1} %); \
         CPU per create {cpu_with:.0} us with, {cpu_without:.0} us without (+{:.1} %); \
         {audit_lines} audit lines written",
        parts.describe(),
        mean_on / mean_off,
        100.0 * (1.0 - median),
        100.0 * (cpu_with / cpu_without - 1.0)
    );
    Ok(())
}
