//! Evictions, as the kubelet's eviction manager makes them: pods over
//! their local storage limits whatever the node's state, and under memory
//! pressure the pods using most beyond what they request. An evicted pod
//! fails as `Evicted` with upstream's message, the DisruptionTarget
//! condition and a Warning event.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use skiff_node::Runtime;
use skiff_node::images::BUSYBOX_IMAGE;
use skiff_testkit::eventually;

use crate::harness::{TestCluster, events, pod_condition, sleeper};

/// Waits for `name` to be evicted; asserts what an eviction always leaves
/// (reason, DisruptionTarget, its containers ended, the Warning event) and
/// returns its message.
async fn evicted(cluster: &TestCluster, name: &str, timeout: Duration) -> String {
    let pod: Pod = cluster.wait_phase(name, timeout, "Failed").await;
    let status = pod.status.clone().unwrap_or_default();
    let message = status.message.clone().unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("Evicted"), "{message}");
    let disruption = pod_condition(&pod, "DisruptionTarget").expect("DisruptionTarget condition");
    assert_eq!(
        (disruption.status.as_str(), disruption.reason.as_deref()),
        ("True", Some("TerminationByKubelet"))
    );
    for c in status.container_statuses.iter().flatten() {
        assert!(
            c.state.as_ref().is_some_and(|s| s.terminated.is_some()),
            "{c:?}"
        );
    }
    let selector = format!("involvedObject.name={name},reason=Evicted");
    eventually(Duration::from_secs(20), "the eviction's event", || async {
        events(cluster, &selector)
            .await
            .into_iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some(message.as_str())
            })
            .then_some(())
    })
    .await;
    message
}

/// A pod of one container `c` that writes 4 MiB and sleeps: into an
/// emptyDir `scratch` of `size_limit` when one is given, else into its
/// writable layer; limited to `storage_limit` of ephemeral storage when one
/// is given.
fn filler(name: &str, size_limit: Option<&str>, storage_limit: Option<&str>) -> serde_json::Value {
    let mut pod = json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE}]}
    });
    let blob = if let Some(limit) = size_limit {
        pod["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {"sizeLimit": limit}}]);
        pod["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "scratch", "mountPath": "/scratch"}]);
        "/scratch/blob"
    } else {
        "/blob"
    };
    let fill = format!("head -c 4194304 /dev/zero > {blob}; exec sleep 3600");
    pod["spec"]["containers"][0]["command"] = json!(["sh", "-c", fill]);
    if let Some(limit) = storage_limit {
        pod["spec"]["containers"][0]["resources"] = json!({"limits": {"ephemeral-storage": limit}});
    }
    pod
}

/// A pod whose emptyDir outgrows its `sizeLimit`, and one whose container
/// writes more than its `ephemeral-storage` limit, are evicted though the
/// node is under no pressure; a pod within its limits keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_over_their_local_storage_limits_are_evicted() {
    let cluster = TestCluster::start(10).await;
    // An emptyDir over its sizeLimit, a container over its limit, and a
    // pod within both.
    for (name, size_limit, storage_limit) in [
        ("spill", Some("1Mi"), None),
        ("scribbler", None, Some("2Mi")),
        ("tidy", Some("64Mi"), Some("64Mi")),
    ] {
        cluster
            .create_pod(filler(name, size_limit, storage_limit))
            .await;
    }
    assert_eq!(
        evicted(&cluster, "spill", Duration::from_secs(60)).await,
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
    );
    // The runtime measures writable layers every few seconds.
    assert_eq!(
        evicted(&cluster, "scribbler", Duration::from_secs(90)).await,
        "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
    );
    let tidy = cluster
        .wait_phase("tidy", Duration::from_secs(30), "Running")
        .await;
    assert!(tidy.status.and_then(|s| s.reason).is_none());
    cluster.teardown().await;
}

/// Under memory pressure the node evicts, one at a time, the pods using
/// more than they request: the pod is stopped and fails as `Evicted`,
/// saying what the node was short of and which container used more than it
/// asked for, with the DisruptionTarget condition and a Warning event. A
/// BestEffort pod is not even admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_under_memory_pressure_evicts_a_pod_using_more_than_it_requests() {
    // A threshold above what is available now, yet below the whole (what
    // it keeps back from allocatable must leave room for the pod): three
    // quarters of the way from available to total.
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let kib = |field: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .expect("meminfo field")
    };
    let (total, available) = (kib("MemTotal:"), kib("MemAvailable:"));
    // The build disk stays out of it, as the harness keeps it out.
    let threshold = format!(
        "memory.available<{}Ki,nodefs.available<0%",
        available + (total - available) * 3 / 4
    );
    // The pod runs first; the pressure comes with the agent's restart.
    let mut cluster = TestCluster::start(9).await;
    cluster
        .run_pod(
            json!({
                "metadata": {"name": "hog"},
                "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                                         "resources": {"requests": {"memory": "1"}}}]}
            }),
            Duration::from_secs(60),
        )
        .await;
    cluster
        .restart_agent_with(|config| {
            config.eviction_hard = threshold.parse().expect("threshold");
        })
        .await;
    let message = evicted(&cluster, "hog", Duration::from_secs(60)).await;
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: ")
            && message.contains(". Container c was using ")
            && message.ends_with(", request is 1, has larger consumption of memory. "),
        "{message}"
    );

    cluster.create_pod(sleeper("frugal", "c")).await;
    let refused = cluster
        .wait_phase("frugal", Duration::from_secs(30), "Failed")
        .await;
    assert_eq!(
        refused.status.and_then(|s| s.message).as_deref(),
        Some("Pod was rejected: The node had condition: [MemoryPressure]. ")
    );
    cluster.teardown().await;
}

/// Under disk pressure the node first removes unused images, then, that not
/// being enough, evicts the pod using most beyond what it requests, saying
/// which container held how much.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_under_disk_pressure_evicts_a_pod_using_more_than_it_requests() {
    // The pod runs first; the pressure comes with the agent's restart.
    let mut cluster = TestCluster::start(11).await;
    cluster
        .run_pod(
            json!({
                "metadata": {"name": "hoarder"},
                "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE,
                                         "command": ["sh", "-c", "echo hoarding; head -c 1048576 /dev/zero > /blob; exec sleep 3600"]}]}
            }),
            Duration::from_secs(60),
        )
        .await;
    import_unused(&cluster).await;
    cluster
        .restart_agent_with(|config| {
            // No disk is ever wholly free: at 100% the threshold is crossed,
            // and removing images cannot relieve it. Memory stays out of it.
            config.eviction_hard = "nodefs.available<100%,memory.available<0%"
                .parse()
                .expect("threshold");
            config.image_gc.minimum_age = Duration::ZERO;
        })
        .await;
    let message = evicted(&cluster, "hoarder", Duration::from_secs(60)).await;
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: ")
            && message.contains(". Container c was using ")
            && message.ends_with(", request is 0, has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    assert!(
        !present(&cluster, UNUSED).await,
        "unused images go before pods"
    );
    assert!(
        present(&cluster, BUSYBOX_IMAGE).await,
        "in use until the eviction"
    );
    cluster.teardown().await;
}

/// An image no pod uses, imported after the agent started (as `skiff
/// images import` or a pull would bring it).
const UNUSED: &str = "docker.io/library/unused:1";
/// An image no pod uses, imported from the airgap directory at the start.
const AIRGAPPED: &str = "docker.io/library/airgapped:1";

/// Writes a one-file image named `name` (its content differs by name) as
/// a docker archive at `path`.
fn image_archive(name: &str, path: &Path) {
    let mut layer = skiff_node::images::LayerBuilder::new();
    layer
        .file("/name", name.as_bytes(), 0o644)
        .expect("layer file");
    skiff_node::images::ImageBuilder::new(name, layer.finish().expect("layer"))
        .write_docker_archive(path)
        .expect("image archive");
}

/// Puts [`AIRGAPPED`] among the images the agent imports at its start.
fn with_airgapped_image(config: &mut skiff_node::agent::AgentConfig) {
    let airgap = config.runtime.images_dir();
    std::fs::create_dir_all(&airgap).expect("airgap dir");
    image_archive(AIRGAPPED, &airgap.join("airgapped.tar"));
}

/// Imports [`UNUSED`] into the node's runtime.
async fn import_unused(cluster: &TestCluster) {
    let archive = cluster.config.agent_dir().join("unused.tar");
    image_archive(UNUSED, &archive);
    let socket = cluster.config.runtime.containerd_paths().socket();
    skiff_node::images::ImageImporter::new(socket)
        .import(&archive)
        .await
        .expect("unused image imported");
}

/// Whether the node's runtime holds `image`, once it answers (the
/// runtime restarts with the agent, and the test's client redials).
async fn present(cluster: &TestCluster, image: &str) -> bool {
    eventually(Duration::from_secs(30), "the runtime's answer", || async {
        Runtime::image_status(&cluster.cri, image)
            .await
            .ok()
            .map(|status| status.is_some())
    })
    .await
}

/// Once the disk is fuller than the high threshold, unused images are
/// removed; images in use and the pause image stay, and when even that
/// cannot reach the low threshold the node says so (`ImageGCFailed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unused_images_are_collected_past_the_high_threshold() {
    let mut cluster = TestCluster::start_with(12, with_airgapped_image).await;
    cluster
        .run_pod(sleeper("user", "c"), Duration::from_secs(60))
        .await;
    import_unused(&cluster).await;
    assert!(present(&cluster, UNUSED).await);
    // Collection from the agent's restart on: any use of the disk is past
    // 1%, and 0% is out of reach.
    cluster
        .restart_agent_with(|config| {
            config.image_gc = skiff_node::agent::image_gc::ImageGcPolicy {
                high_threshold_percent: 1,
                low_threshold_percent: 0,
                minimum_age: Duration::ZERO,
                period: Duration::from_secs(1),
            };
        })
        .await;
    eventually(
        Duration::from_secs(30),
        "the unused image's removal",
        || async { (!present(&cluster, UNUSED).await).then_some(()) },
    )
    .await;
    assert!(present(&cluster, BUSYBOX_IMAGE).await, "in use, so kept");
    assert!(
        present(&cluster, skiff_node::images::PAUSE_IMAGE).await,
        "the pause image stays"
    );
    assert!(
        present(&cluster, AIRGAPPED).await,
        "airgap images stay: no registry may hold them"
    );
    eventually(Duration::from_secs(20), "the node's ImageGCFailed event", || async {
        events(&cluster, "involvedObject.kind=Node,reason=ImageGCFailed")
            .await
            .into_iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref().is_some_and(|m| {
                        m.starts_with("Failed to garbage collect required amount of images. Attempted to free ")
                    })
            })
            .then_some(())
    })
    .await;
    cluster.teardown().await;
}
