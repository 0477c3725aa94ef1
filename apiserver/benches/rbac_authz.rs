//! What RBAC authorization costs a request, as a ratio: the same ConfigMap
//! creates and gets through the router (in-process kube clients, several
//! concurrent tasks) as a `system:masters` user, decided by the first link
//! of the chain, and as a service account whose only permission is one
//! RoleBinding among 1,000 (one per namespace, each to its namespace's own
//! account), decided by RBAC. The two identities take turns in rounds in
//! one run (alternating who goes first), so machine noise hits both alike.
//!
//! Beside the API rates, the chain's decision alone is timed for both
//! identities on one thread, so its cost per request can be read against
//! the CPU time a request takes.
//!
//! Run: `cargo bench -p skiff-apiserver --bench rbac_authz`
//! (env `BENCH_SCALE=0.1` for a quick smoke run).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::authz::{Attributes, Chain, RequestKind, ResourceAttributes};
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::{SledConfig, SledStore, Store};

use crate::support::scale;

const CONCURRENCY: usize = 16;
const NAMESPACES: usize = 1_000;
/// The namespace whose account does the measured requests.
const MEASURED: usize = NAMESPACES / 2;
const ROUNDS: usize = 4;

fn namespace_name(i: usize) -> String {
    format!("bench-{i:04}")
}

fn account(i: usize) -> UserInfo {
    UserInfo::service_account(&namespace_name(i), "writer")
}

fn configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some([("payload".to_string(), "x".repeat(256))].into()),
        ..Default::default()
    }
}

/// Runs `op(shared, 0..total)` on [`CONCURRENCY`] clients; returns
/// operations per second and how many failed.
async fn throughput<T, F, Fut>(total: usize, shared: T, op: F) -> (f64, usize)
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let run = support::concurrently(CONCURRENCY, total, shared, op).await;
    (total as f64 / run.took.as_secs_f64(), run.failed)
}

/// Creates every namespace and its RoleBinding (`edit` for its writer).
async fn populate(admin: &kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let shared = (namespaces, admin.clone());
    let (_, failed) = throughput(NAMESPACES, shared, |(namespaces, admin), i| {
        async move {
            let ns = namespace_name(i);
            let namespace = Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let binding: Result<RoleBinding, _> = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "writer-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": ns}]
            }));
            let bindings: Api<RoleBinding> = Api::namespaced(admin, &ns);
            namespaces
                .create(&PostParams::default(), &namespace)
                .await
                .is_ok()
                && match binding {
                    Ok(b) => bindings.create(&PostParams::default(), &b).await.is_ok(),
                    Err(_) => false,
                }
        }
    })
    .await;
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} namespaces or bindings could not be created").into()),
    }
}

#[derive(Default)]
struct Rates {
    creates: Vec<f64>,
    gets: Vec<f64>,
}

impl Rates {
    fn total(list: &[f64]) -> f64 {
        list.iter().sum::<f64>() / list.len().max(1) as f64
    }
}

async fn round(
    client: &kube::Client,
    tag: &str,
    round: usize,
    creates: usize,
    gets: usize,
    rates: &mut Rates,
) -> Result<(), Box<dyn std::error::Error>> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace_name(MEASURED));
    let prefix = format!("{tag}-{round}");
    let (rate, failed_creates) = throughput(creates, cms.clone(), {
        let prefix = prefix.clone();
        move |api, i| {
            let name = format!("{prefix}-{i}");
            async move {
                let created = api.create(&PostParams::default(), &configmap(&name)).await;
                created.is_ok()
            }
        }
    })
    .await;
    rates.creates.push(rate);
    let (rate, failed_gets) = throughput(gets, cms, move |api, i| {
        let name = format!("{prefix}-{}", i % creates);
        async move { api.get(&name).await.is_ok() }
    })
    .await;
    rates.gets.push(rate);
    match failed_creates + failed_gets {
        0 => Ok(()),
        n => Err(format!("{tag}: {n} requests failed (not authorized?)").into()),
    }
}

/// Nanoseconds per decision of `chain` on a create of a ConfigMap in the
/// measured namespace by `user` (which must be allowed).
fn decision_ns(chain: &Chain, user: UserInfo, decisions: usize) -> Result<f64, String> {
    let attributes = Attributes {
        user,
        verb: "create".into(),
        request: RequestKind::Resource(ResourceAttributes {
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: namespace_name(MEASURED),
            ..Default::default()
        }),
    };
    chain.decide(&attributes)?;
    let started = Instant::now();
    for _ in 0..decisions {
        std::hint::black_box(chain.decide(std::hint::black_box(&attributes)))?;
    }
    Ok(started.elapsed().as_nanos() as f64 / decisions as f64)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SledStore::open(SledConfig::new(dir.path().join("db")))?);
    let api = ApiServer::new(store.clone(), ApiServerConfig::default()).await?;
    let master = skiff_apiserver::inprocess::client(
        api.router(),
        UserInfo::new("bench-admin", ["system:masters".to_string()]),
    );
    let started = Instant::now();
    populate(&master).await?;
    eprintln!(
        "{NAMESPACES} namespaces with one RoleBinding each in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let writer = skiff_apiserver::inprocess::client(api.router(), account(MEASURED));

    let (creates, gets) = (scale(4_000), scale(40_000));
    let (mut as_master, mut as_account) = (Rates::default(), Rates::default());
    for r in 0..ROUNDS {
        // Alternating who goes first evens out warm-up and drift.
        if r % 2 == 0 {
            round(&master, "master", r, creates, gets, &mut as_master).await?;
            round(&writer, "account", r, creates, gets, &mut as_account).await?;
        } else {
            round(&writer, "account", r, creates, gets, &mut as_account).await?;
            round(&master, "master", r, creates, gets, &mut as_master).await?;
        }
        eprintln!(
            "round {r}: creates/s master {:.0} account {:.0}; gets/s master {:.0} account {:.0}",
            as_master.creates[r], as_account.creates[r], as_master.gets[r], as_account.gets[r]
        );
    }
    let (cm, ca) = (
        Rates::total(&as_master.creates),
        Rates::total(&as_account.creates),
    );
    let (gm, ga) = (
        Rates::total(&as_master.gets),
        Rates::total(&as_account.gets),
    );
    let chain = api.authorizer();
    let decisions = scale(2_000_000);
    let admin = UserInfo::new("bench-admin", ["system:masters".to_string()]);
    let (dm, da) = (
        decision_ns(&chain, admin, decisions)?,
        decision_ns(&chain, account(MEASURED), decisions)?,
    );
    // CPU time per get on this machine's two cores, for scale.
    let get_cpu_ns = 2.0 * 1e9 / ga;
    eprintln!(
        "one decision: masters {dm:.0} ns, rbac {da:.0} ns; a get through the router takes ~{get_cpu_ns:.0} ns of CPU"
    );
    api.shutdown();
    store.close().await?;
    println!(
        "rbac_authz: {NAMESPACES} namespaces x 1 RoleBinding, {CONCURRENCY} concurrent clients, {ROUNDS} rounds: \
         creates/s masters {cm:.0} rbac {ca:.0} (rbac/masters {:.3}); gets/s masters {gm:.0} rbac {ga:.0} (rbac/masters {:.3}); \
         one decision masters {dm:.0} ns rbac {da:.0} ns (the difference is {:.2} % of a get's CPU)",
        ca / cm,
        ga / gm,
        100.0 * (da - dm) / get_cpu_ns
    );
    Ok(())
}
