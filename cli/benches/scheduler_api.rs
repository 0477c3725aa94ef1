//! The scheduler through the real API, in the style of upstream's scheduler_perf, all
//! workloads in one run: for each, a fresh in-process API server on a sled store in a
//! temporary directory, plain Node objects and pods created through the API, then the
//! real scheduler (shared informers, `pods/binding`, `Scheduled` events) started on it.
//! Throughput is pods bound per second from the first measured pod handed to the
//! scheduler's queue (its informer delivering the pending pod) to the last binding the
//! API acknowledged. The same workload also runs against the scheduler alone with an
//! in-memory binder, side by side, so the cost of the API path shows as a ratio, and
//! through an API server on etcd (Debian's etcd, a fresh one per workload, started by the
//! bench), so the store's cost shows as a sled / etcd ratio (issue #16).
//!
//! Run: `cargo bench -p skiff --bench scheduler_api` (add `-- quick` for 1/10 sizes,
//! `-- only=Spread` to run matching workloads only). The last line is the summary
//! compared over time (issue #17):
//! `scheduler_api: basic_pods_per_s=… spread_pods_per_s=… antiaffinity_pods_per_s=… preemption_pods_per_s=…`.

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_informer::{HandlerFns, SharedInformerFactory};
use skiff_scheduler::SchedulerConfig;
use skiff_scheduler::testing::perf::{
    basic_pod, bound_pods, cpu_seconds, memory_mib, node, pending_pods, spread_pods,
};
use skiff_scheduler::testing::{PodBuilder, TestCluster};
use skiff_store::testing::EtcdProcess;
use skiff_store::{EtcdConfig, EtcdStore, SledConfig, SledStore, Store};
use skiff_testkit::UserInfo;

/// Counts live heap bytes, so a phase's memory growth can be read without the
/// allocator's retention blurring it as RSS does. Underneath is jemalloc, the
/// allocator the `skiff` binary runs on, so the path is measured as it runs.
struct CountingAlloc;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { JEMALLOC.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { JEMALLOC.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { JEMALLOC.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn live_mib() -> f64 {
    LIVE_BYTES.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)
}

/// The live heap once it has stopped moving (two readings 200 ms apart within
/// 0.5 MiB, at most 10 s): background work of the API server, the store or an earlier
/// workload still being freed would otherwise count against the scheduler.
async fn settled_heap_mib() -> f64 {
    let mut last = live_mib();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = live_mib();
        if (now - last).abs() < 0.5 {
            return now;
        }
        last = now;
    }
    last
}

struct Workload {
    name: &'static str,
    /// The workload's key in the summary line (`<key>_pods_per_s`).
    key: &'static str,
    nodes: Vec<Node>,
    /// Pods already bound (spec.nodeName set) before measuring.
    init: Vec<Pod>,
    /// Pending pods whose scheduling is measured.
    measured: Vec<Pod>,
    /// Upstream's scheduler_perf threshold for the nearest workload, and what it is.
    upstream: (&'static str, &'static str),
}

/// Upstream's preemption templates delete victims at once.
fn no_grace(mut pod: Pod) -> Pod {
    pod.spec
        .get_or_insert_default()
        .termination_grace_period_seconds = Some(0);
    pod
}

fn with_class(mut pod: Pod, class: &str) -> Pod {
    let spec = pod.spec.get_or_insert_default();
    spec.priority_class_name = Some(class.into());
    pod
}

/// Upstream's scheduler_perf performance workloads at their sizes (`quick` divides
/// every count by 10). Upstream creates init pods unbound and lets the scheduler place
/// them before measuring; here they are created bound, spread round-robin, which leaves
/// the same kind of cluster behind.
fn workloads(scale: usize) -> Vec<Workload> {
    let mut out = Vec::new();

    // SchedulingBasic 5000Nodes_10000Pods.
    let nodes = 5000 / scale;
    out.push(Workload {
        name: "SchedulingBasic",
        key: "basic",
        nodes: (0..nodes).map(|i| node(i, 10)).collect(),
        init: bound_pods(1000 / scale, nodes),
        measured: pending_pods(10_000 / scale),
        upstream: ("270", "SchedulingBasic 5000Nodes_10000Pods"),
    });

    // TopologySpreading 5000Nodes_5000Pods: nodes in three zones, plain init pods,
    // measured pods with a hard zone constraint of maxSkew 1.
    out.push(Workload {
        name: "TopologySpreading",
        key: "spread",
        nodes: (0..nodes).map(|i| node(i, 3)).collect(),
        init: bound_pods(5000 / scale, nodes),
        measured: spread_pods(5000 / scale),
        upstream: ("85", "TopologySpreading 5000Nodes_5000Pods"),
    });

    // SchedulingPodAntiAffinity 5000Nodes_2000Pods: every pod, init and measured,
    // repels every other per hostname. Upstream puts init and measured pods in two
    // namespaces named in the term; one namespace here is the same constraint.
    let anti = |name: String| {
        basic_pod(&name)
            .label("color", "green")
            .pod_anti_affinity(&[("color", "green")], "kubernetes.io/hostname")
    };
    out.push(Workload {
        name: "SchedulingPodAntiAffinity",
        key: "antiaffinity",
        nodes: (0..nodes).map(|i| node(i, 10)).collect(),
        init: (0..1000 / scale)
            .map(|i| {
                anti(format!("anti-init-{i}"))
                    .node(&format!("node-{i}"))
                    .build()
            })
            .collect(),
        measured: (0..2000 / scale)
            .map(|i| anti(format!("anti-{i}")).build())
            .collect(),
        upstream: ("60", "SchedulingPodAntiAffinity 5000Nodes_2000Pods"),
    });

    // PreemptionBasic 1000Nodes: four 900m low-priority pods fill each node; every
    // high-priority pod needs 3 CPUs, so it preempts three of them.
    let nodes = 1000 / scale;
    out.push(Workload {
        name: "PreemptionBasic",
        key: "preemption",
        nodes: (0..nodes).map(|i| node(i, 10)).collect(),
        init: (0..nodes * 4)
            .map(|i| {
                let p = PodBuilder::new(&format!("low-{i}"))
                    .priority(1)
                    .container(&[("cpu", "900m"), ("memory", "500Mi")])
                    .node(&format!("node-{}", i / 4))
                    .build();
                with_class(no_grace(p), "low")
            })
            .collect(),
        measured: (0..nodes)
            .map(|i| {
                let p = PodBuilder::new(&format!("high-{i}"))
                    .priority(100)
                    .container(&[("cpu", "3"), ("memory", "500Mi")])
                    .build();
                with_class(no_grace(p), "high")
            })
            .collect(),
        upstream: ("none published", "PreemptionBasic 1000Nodes"),
    });
    out
}

/// What one run measured.
struct Measure {
    scheduled: usize,
    elapsed: Duration,
    cpu: f64,
    /// Live-heap growth over the measured phase, MiB.
    heap_mib: f64,
    /// RSS growth over the measured phase, MiB.
    rss_mib: f64,
    /// Store writes and flushes over the measured phase (API runs only).
    writes: u64,
    flushes: u64,
    /// Live heap the scheduler and its informers released when dropped after the
    /// API run, MiB.
    scheduler_mib: f64,
}

impl Measure {
    fn rate(&self) -> f64 {
        self.scheduled as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn per_cpu(&self) -> f64 {
        self.scheduled as f64 / self.cpu.max(0.01)
    }

    /// The start of a run's progress line (left open for what the caller
    /// adds): the workload, how many of its pods were bound, how fast, and
    /// the CPU it took.
    fn progress(&self, w: &Workload, label: &str) -> String {
        format!(
            "{:<24} {label} {:>6}/{} pods in {:>6.0} ms ({:.0} pods/s, {:.1} cpu-s",
            w.name,
            self.scheduled,
            w.measured.len(),
            self.elapsed.as_secs_f64() * 1000.0,
            self.rate(),
            self.cpu,
        )
    }

    /// The note after a rate when not all `measured` pods were bound.
    fn shortfall(&self, measured: usize) -> String {
        if self.scheduled < measured {
            format!(" (only {} bound)", self.scheduled)
        } else {
            String::new()
        }
    }
}

/// The scheduler alone: the fake binder, binds confirmed through the informer path as the
/// API would, preemption victims deleted at once, the fake clock advanced past backoffs.
fn in_memory(w: &Workload) -> Measure {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let heap0 = live_mib();
    let rss0 = memory_mib("VmRSS:");
    let c = TestCluster::new();
    for n in &w.nodes {
        c.scheduler.on_node_add(Arc::new(n.clone()));
    }
    for p in &w.init {
        c.add_pod(p.clone());
    }
    let expect = w.measured.len();
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    for p in &w.measured {
        c.add_pod(p.clone());
    }
    let scheduled = c.drive_until(&rt, expect);
    let m = Measure {
        scheduled,
        elapsed: start.elapsed(),
        cpu: cpu_seconds() - cpu0,
        heap_mib: live_mib() - heap0,
        rss_mib: memory_mib("VmRSS:") - rss0,
        writes: 0,
        flushes: 0,
        scheduler_mib: 0.0,
    };
    drop(c);
    m
}

/// Objects as a client sends them: no UID, no resourceVersion.
fn for_create<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().uid = None;
    obj.meta_mut().resource_version = None;
    obj
}

async fn create_all<K>(api: &Api<K>, objects: &[K]) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let results: Vec<Result<K, kube::Error>> = futures::stream::iter(objects.iter().cloned())
        .map(|o| async move { api.create(&PostParams::default(), &for_create(o)).await })
        .buffer_unordered(64)
        .collect()
        .await;
    results.into_iter().try_for_each(|r| r.map(|_| ()))
}

fn priority_class(name: &str, value: i32) -> PriorityClass {
    PriorityClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        value,
        ..Default::default()
    }
}

/// A pod as a user would create it: containers name an image, and `spec.priority` is
/// left to the admission controller to fill from the class.
fn api_pod(mut pod: Pod) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        if spec.priority_class_name.is_some() {
            spec.priority = None;
        }
        for c in &mut spec.containers {
            c.image
                .get_or_insert_with(|| "registry.k8s.io/pause:3.10".into());
        }
    }
    pod
}

/// Which store the API server of a run keeps its objects in.
#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Sled,
    Etcd,
}

/// An in-process API server on a fresh store of one backend.
struct ApiCluster {
    api: ApiServer,
    store: Arc<dyn Store>,
    /// The sled store, whose write and flush counts the table reports.
    sled: Option<Arc<SledStore>>,
    etcd: Option<EtcdProcess>,
    _dir: tempfile::TempDir,
}

impl ApiCluster {
    async fn start(backend: Backend) -> Result<Self, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let (store, sled, etcd): (Arc<dyn Store>, _, _) = match backend {
            Backend::Sled => {
                let sled = Arc::new(SledStore::open(SledConfig::new(dir.path().join("db")))?);
                (sled.clone(), Some(sled), None)
            }
            Backend::Etcd => {
                let etcd = EtcdProcess::start(dir.path())?;
                let store = EtcdStore::connect(EtcdConfig::new([etcd.endpoint()])).await?;
                (Arc::new(store), None, Some(etcd))
            }
        };
        let api = ApiServer::new(store.clone(), ApiServerConfig::default()).await?;
        Ok(Self {
            api,
            store,
            sled,
            etcd,
            _dir: dir,
        })
    }

    fn client_as(&self, user: UserInfo) -> kube::Client {
        skiff_apiserver::inprocess::client(self.api.router(), user)
    }

    /// Store writes and flushes so far (sled only; zero on etcd).
    fn writes_and_flushes(&self) -> Result<(u64, u64), Box<dyn std::error::Error>> {
        Ok(match &self.sled {
            Some(sled) => {
                let stats = sled.stats()?;
                (stats.writes, stats.flushes)
            }
            None => (0, 0),
        })
    }

    async fn stop(mut self) -> Result<(), Box<dyn std::error::Error>> {
        self.api.shutdown();
        self.store.close().await?;
        drop(self.etcd.take());
        Ok(())
    }
}

/// The real path: API server, store, informers, scheduler, `pods/binding`.
async fn through_api(
    w: &Workload,
    backend: Backend,
) -> Result<Measure, Box<dyn std::error::Error>> {
    let cluster = ApiCluster::start(backend).await?;
    let admin = cluster.client_as(UserInfo::new(
        skiff_testkit::ADMIN,
        ["system:masters".to_string()],
    ));
    let classes: Api<PriorityClass> = Api::all(admin.clone());
    create_all(
        &classes,
        &[priority_class("low", 1), priority_class("high", 100)],
    )
    .await?;
    create_all(&Api::<Node>::all(admin.clone()), &w.nodes).await?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let init: Vec<Pod> = w.init.iter().cloned().map(api_pod).collect();
    let measured: Vec<Pod> = w.measured.iter().cloned().map(api_pod).collect();
    create_all(&pods, &init).await?;
    create_all(&pods, &measured).await?;

    let heap0 = live_mib();
    let rss0 = memory_mib("VmRSS:");
    let client = cluster.client_as(UserInfo::new(
        "system:kube-scheduler",
        ["system:authenticated".to_string()],
    ));
    let factory = SharedInformerFactory::new(client.clone());
    let first_enqueued: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = first_enqueued.clone();
    factory
        .informer::<Pod>()
        .add_event_handler(HandlerFns::new().on_add(move |pod: &Arc<Pod>| {
            let pending = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none();
            if pending && let Ok(mut first) = seen.lock() {
                first.get_or_insert_with(Instant::now);
            }
        }))?;
    let scheduler =
        skiff_scheduler::informers::register(client, &factory, &SchedulerConfig::default())?;
    let cpu0 = cpu_seconds();
    let stats0 = cluster.writes_and_flushes()?;
    factory.start()?;
    factory.wait_for_sync().await;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = tokio::spawn(scheduler.clone().run(async move {
        let _ = stop_rx.await;
    }));
    let expect = w.measured.len() as u64;
    let deadline = Instant::now() + Duration::from_secs(300);
    while scheduler.bound_count() < expect && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let done = Instant::now();
    let cpu = cpu_seconds() - cpu0;
    let heap = live_mib() - heap0;
    let rss = memory_mib("VmRSS:") - rss0;
    let scheduled = scheduler.bound_count() as usize;
    let stats = cluster.writes_and_flushes()?;
    let start = first_enqueued.lock().ok().and_then(|f| *f).unwrap_or(done);

    let _ = stop_tx.send(());
    let _ = runner.await;
    factory.shutdown();
    // What the scheduler holds (its cache, queue and snapshot, and the informers it
    // registered): the live heap it gives back when it and its informers are dropped,
    // once the API server has gone quiet.
    let held = settled_heap_mib().await;
    drop(scheduler);
    drop(factory);
    let scheduler_mib = held - settled_heap_mib().await;
    // Let the store's and server's background threads finish releasing memory, so the
    // next workload's heap and RSS growth is its own.
    cluster.stop().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(Measure {
        scheduled,
        elapsed: done.saturating_duration_since(start),
        cpu,
        heap_mib: heap,
        rss_mib: rss,
        writes: stats.0 - stats0.0,
        flushes: stats.1 - stats0.1,
        scheduler_mib,
    })
}

/// The cells both results tables open with: the workload, its size, and its
/// pods/s through the API on sled (noting any pods left unbound).
fn leading_cells(w: &Workload, api: &Measure) -> String {
    format!(
        "| {} | {} | {} | {:.0}{}",
        w.name,
        w.nodes.len(),
        w.measured.len(),
        api.rate(),
        api.shortfall(w.measured.len())
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let scale = if args.iter().any(|a| a == "quick") {
        10
    } else {
        1
    };
    let only: Vec<String> = args
        .iter()
        .filter_map(|a| a.strip_prefix("only=").map(String::from))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;

    let selected: Vec<Workload> = workloads(scale)
        .into_iter()
        .filter(|w| only.is_empty() || only.iter().any(|o| w.name.contains(o.as_str())))
        .collect();
    // Every in-memory run comes first, on a quiet heap: an API run's server and store
    // go on freeing memory for a while after they are dropped, which would make a
    // following in-memory run's heap growth meaningless.
    let in_memory_runs: Vec<Measure> = selected.iter().map(in_memory).collect();
    let mut rows = Vec::new();
    for (w, mem) in selected.iter().zip(in_memory_runs) {
        let api = rt.block_on(through_api(w, Backend::Sled))?;
        let on_etcd = rt.block_on(through_api(w, Backend::Etcd))?;
        eprintln!("{})", on_etcd.progress(w, "api on etcd"));
        eprintln!(
            "{}, {} store writes in {} flushes, scheduler held {:.0} MiB); in-memory {:.0} pods/s",
            api.progress(w, "api"),
            api.writes,
            api.flushes,
            api.scheduler_mib,
            mem.rate()
        );
        rows.push((w, api, mem, on_etcd));
    }

    println!(
        "| workload | nodes | pods | through the API: pods/s | pods per CPU-second | upstream threshold (workload) | in-memory binder: pods/s | API / in-memory | scheduler + informers held after the API run | scheduler alone, heap growth in memory | process RSS growth, API run |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (w, api, mem, _) in &rows {
        println!(
            "{} | {:.0} | {} ({}) | {:.0} | {:.2} | {:.0} MiB | {:.0} MiB | {:.0} MiB |",
            leading_cells(w, api),
            api.per_cpu(),
            w.upstream.0,
            w.upstream.1,
            mem.rate(),
            api.rate() / mem.rate().max(1e-9),
            api.scheduler_mib,
            mem.heap_mib,
            api.rss_mib,
        );
    }
    println!();
    println!(
        "| workload | nodes | pods | API on sled: pods/s | API on etcd 3.4: pods/s | sled / etcd | pods per CPU-second of the bench process (etcd's own not counted), sled / etcd |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (w, api, _, etcd) in &rows {
        println!(
            "{} | {:.0}{} | {:.2} | {:.0} / {:.0} |",
            leading_cells(w, api),
            etcd.rate(),
            etcd.shortfall(w.measured.len()),
            api.rate() / etcd.rate().max(1e-9),
            api.per_cpu(),
            etcd.per_cpu(),
        );
    }
    // The line compared over time (issue #17): pods/s through the API per workload,
    // `na` for one not run.
    let summary: Vec<String> = ["basic", "spread", "antiaffinity", "preemption"]
        .iter()
        .map(|key| {
            let rate = rows
                .iter()
                .find(|(w, _, _, _)| w.key == *key)
                .map_or("na".to_string(), |(_, api, _, _)| {
                    format!("{:.0}", api.rate())
                });
            format!("{key}_pods_per_s={rate}")
        })
        .collect();
    println!("scheduler_api: {}", summary.join(" "));
    Ok(())
}
