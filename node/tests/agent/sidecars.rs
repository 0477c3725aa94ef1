//! Sidecars (init containers with `restartPolicy: Always`, upstream's
//! native sidecars) on real containerd: the pod's containers start once a
//! sidecar has started, without waiting for it to end; a sidecar that
//! exits is restarted while the pod stays initialized and its containers
//! keep running; a Job-like pod completes when its containers do, its
//! sidecars stopped first; on
//! deletion a sidecar stops after the containers it serves.

use std::time::Duration;

use k8s_openapi::api::core::v1::ContainerStatus;
use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::{
    TestCluster, condition, container_status, init_container_status, phase, release,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sidecars_start_before_the_containers_and_run_beside_them() {
    let cluster = TestCluster::start(6).await;
    // A run-to-completion pod: its container needs what the sidecar wrote
    // before it started, and the sidecar never ends on its own.
    cluster
        .create_pod(json!({
            "metadata": {"name": "job"},
            "spec": {
                "restartPolicy": "Never",
                "volumes": [{"name": "shared", "emptyDir": {}}],
                "initContainers": [{
                    "name": "proxy", "image": BUSYBOX_IMAGE, "restartPolicy": "Always",
                    "command": ["sh", "-c",
                                "trap 'exit 0' TERM; touch /shared/up; while true; do sleep 0.1; done"],
                    "startupProbe": {"exec": {"command": ["test", "-f", "/shared/up"]},
                                     "periodSeconds": 1},
                    "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]
                }],
                "containers": [{
                    "name": "work", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", "test -f /shared/up"],
                    "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]
                }]
            }
        }))
        .await;
    // A long-running pod whose sidecar exits every second.
    cluster
        .create_pod(json!({
            "metadata": {"name": "web"},
            "spec": {
                "initContainers": [{
                    "name": "flaky", "image": BUSYBOX_IMAGE, "restartPolicy": "Always",
                    "command": ["sh", "-c", "sleep 1; exit 3"]
                }],
                "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                                "command": ["sleep", "3600"]}]
            }
        }))
        .await;

    // A pod whose container takes two seconds to stop and whose sidecar
    // stops at once; a finalizer of the test's own keeps the object after
    // the node's final delete, so its last status can be read.
    let stops_slowly = "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.1; done";
    let stops_at_once = "trap 'exit 0' TERM; while true; do sleep 0.1; done";
    cluster
        .create_pod(json!({
            "metadata": {"name": "ordered", "finalizers": ["example.com/hold"]},
            "spec": {
                "terminationGracePeriodSeconds": 10,
                "initContainers": [{"name": "side", "image": BUSYBOX_IMAGE,
                    "restartPolicy": "Always", "command": ["sh", "-c", stops_at_once]}],
                "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                                "command": ["sh", "-c", stops_slowly]}]
            }
        }))
        .await;

    let done = cluster
        .wait_phase("job", Duration::from_secs(90), "Succeeded")
        .await;
    let work = container_status(&done, "work").expect("work's status");
    let exit = work.state.as_ref().and_then(|s| s.terminated.as_ref());
    assert_eq!(exit.map(|t| t.exit_code), Some(0), "{work:?}");
    let proxy = init_container_status(&done, "proxy").expect("the sidecar's status");
    assert_eq!(proxy.restart_count, 0, "{proxy:?}");
    // The pod is over only once its sidecar was stopped: the final status
    // tells how it ended, not that it runs and is ready.
    let ended = proxy.state.as_ref().and_then(|s| s.terminated.as_ref());
    assert_eq!(ended.map(|t| t.exit_code), Some(0), "{proxy:?}");
    assert!(!proxy.ready, "{proxy:?}");

    let web = cluster
        .wait_pod(
            "web",
            Duration::from_secs(90),
            "the sidecar restarted beside its running container",
            |p| {
                init_container_status(p, "flaky").is_some_and(|s| s.restart_count >= 2)
                    && container_status(p, "app").is_some_and(|s| {
                        s.state
                            .as_ref()
                            .and_then(|st| st.running.as_ref())
                            .is_some()
                    })
            },
        )
        .await;
    assert_eq!(phase(&web), "Running");
    assert_eq!(condition(&web, "Initialized").as_deref(), Some("True"));
    let app = container_status(&web, "app").expect("app's status");
    assert_eq!(app.restart_count, 0, "the container kept running: {app:?}");

    // On deletion the sidecar outlives the container it serves.
    cluster
        .wait_phase("ordered", Duration::from_secs(60), "Running")
        .await;
    cluster.delete_pod("ordered").await;
    let last = cluster
        .wait_final_delete("ordered", Duration::from_secs(60))
        .await;
    let finished = |s: Option<&ContainerStatus>| {
        s.and_then(|s| s.state.as_ref()?.terminated.as_ref()?.finished_at.clone())
            .map(|t| t.0)
            .unwrap_or_else(|| panic!("not terminated: {s:?}"))
    };
    let (app_end, side_end) = (
        finished(container_status(&last, "app")),
        finished(init_container_status(&last, "side")),
    );
    assert!(
        side_end >= app_end,
        "the sidecar stopped at {side_end}, before its container ({app_end})"
    );
    release(&cluster.pods(), "ordered").await;
    cluster.teardown().await;
}
