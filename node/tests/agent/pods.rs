//! Pods on one agent: run to completion with logs, crash-loop, volumes and
//! env, readiness, a missing image, graceful deletion with a preStop hook.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use skiff_node::agent::pod::logs::{self, LogOptions, LogTarget};
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::{
    TestCluster, assert_terminated, condition, container_id, container_status, events, exec,
    init_container_status, phase, pod_condition, release,
};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_run_crash_probe_and_stop_on_real_containerd() {
    let cluster = TestCluster::start(1).await;

    // The Node as registered.
    let node = Api::<Node>::all(cluster.client.clone())
        .get("node-1")
        .await
        .expect("node");
    let status = node.status.clone().expect("node status");
    let info = status.node_info.expect("node info");
    assert!(
        info.container_runtime_version
            .starts_with("containerd://1."),
        "{info:?}"
    );
    assert_eq!(info.kubelet_version, "v1.33.0-skiff");
    let capacity = status.capacity.expect("capacity");
    assert_eq!(capacity["pods"].0, "110");
    assert!(capacity.contains_key("cpu") && capacity.contains_key("memory"));
    assert_eq!(
        node.spec.and_then(|s| s.pod_cidr).as_deref(),
        Some(cluster.config.fallback_pod_cidr.as_str())
    );
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        cluster.client.clone(),
        "kube-node-lease",
    )
    .get("node-1")
    .await
    .expect("lease");
    assert!(lease.spec.and_then(|s| s.renew_time).is_some());

    cluster
        .create_configmap(json!({
            "metadata": {"name": "settings"},
            "data": {"greeting": "hello from a configmap", "mode": "fast"}
        }))
        .await;

    // 1. Prints and exits: Succeeded, exit 0, Completed, log content; env
    //    from a configMapKeyRef, a fieldRef and $(VAR) expansion in args.
    cluster
        .create_pod(json!({
            "metadata": {"name": "hello"},
            "spec": {
                "restartPolicy": "Never",
                "volumes": [{"name": "work", "emptyDir": {}}],
                "initContainers": [{
                    "name": "prepare", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", "echo from-init > /work/msg"],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}]
                }],
                "containers": [{
                    "name": "main", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c"],
                    "args": ["echo \"$(GREETING) to $(POD_NAME) mode=$MODE $(cat /work/msg)\""],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                    "env": [
                        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "MODE", "value": "$(GREETING)!"}
                    ]
                }]
            }
        }))
        .await;
    let hello = cluster.wait_phase("hello", LONG, "Succeeded").await;
    let main = container_status(&hello, "main").expect("status of main");
    assert_terminated(main.state.as_ref(), "terminated", 0, "Completed");
    let pod_status = hello.status.as_ref().expect("status");
    let init = init_container_status(&hello, "prepare").expect("init statuses");
    assert_terminated(init.state.as_ref(), "init terminated", 0, "Completed");
    assert_eq!(condition(&hello, "Initialized").as_deref(), Some("True"));
    assert!(
        pod_status.pod_ip.is_some()
            && pod_status.host_ip.is_some()
            && pod_status.start_time.is_some()
    );
    assert_eq!(pod_status.qos_class.as_deref(), Some("BestEffort"));
    let uid = hello.metadata.uid.clone().expect("uid");
    let target = LogTarget {
        log_root: &cluster.log_root(),
        namespace: "default",
        name: "hello",
        uid: &uid,
        container: "main",
    };
    let log = logs::read(&target, &LogOptions::default()).expect("log");
    assert_eq!(
        String::from_utf8_lossy(&log),
        "hello from a configmap to hello mode=hello from a configmap! from-init\n"
    );

    // 2. Crash loop: restartCount grows, CrashLoopBackOff with the last
    //    termination (exit 3, Error), --previous log.
    cluster
        .create_pod(json!({
            "metadata": {"name": "crasher"},
            "spec": {"containers": [{
                "name": "c", "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c", "echo run; exit 3"]
            }]}
        }))
        .await;
    let crashing = cluster
        .wait_pod("crasher", LONG, "CrashLoopBackOff after 2 restarts", |p| {
            container_status(p, "c").is_some_and(|c| {
                c.restart_count >= 2
                    && c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        == Some("CrashLoopBackOff")
            })
        })
        .await;
    let c = container_status(&crashing, "c").expect("status");
    assert_terminated(c.last_state.as_ref(), "last state", 3, "Error");
    assert_eq!(phase(&crashing), "Running");
    let crasher_uid = crashing.metadata.uid.clone().expect("uid");
    let previous = logs::read(
        &LogTarget {
            name: "crasher",
            uid: &crasher_uid,
            container: "c",
            ..target.clone()
        },
        &LogOptions {
            previous: true,
            ..Default::default()
        },
    )
    .expect("previous log");
    assert_eq!(previous, b"run\n");

    // 3. A configMap volume read through exec; readiness probe flips Ready.
    cluster
        .create_pod(json!({
            "metadata": {"name": "reader"},
            "spec": {
                "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}, {"name": "scratch", "emptyDir": {}}],
                "containers": [{
                    "name": "app", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", "sleep 2; touch /scratch/ready; exec sleep 3600"],
                    "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "scratch", "mountPath": "/scratch"}],
                    "readinessProbe": {"exec": {"command": ["cat", "/scratch/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
                }]
            }
        }))
        .await;
    let running = cluster.wait_phase("reader", LONG, "Running").await;
    let id = container_id(&running, "app");
    let (code, out) = exec(&cluster.cri, &id, &["cat", "/etc/cfg/greeting"]).await;
    assert_eq!((code, out.as_str()), (0, "hello from a configmap"));
    cluster
        .wait_pod("reader", LONG, "Ready", |p| {
            condition(p, "Ready").as_deref() == Some("True")
        })
        .await;
    let (code, _) = exec(&cluster.cri, &id, &["rm", "/scratch/ready"]).await;
    assert_eq!(code, 0);
    let unready = cluster
        .wait_pod("reader", LONG, "not Ready", |p| {
            condition(p, "Ready").as_deref() == Some("False")
        })
        .await;
    assert_eq!(
        condition(&unready, "ContainersReady").as_deref(),
        Some("False")
    );
    assert_eq!(phase(&unready), "Running");

    // 4. An absent image with pull policy Never.
    cluster
        .create_pod(json!({
            "metadata": {"name": "noimage"},
            "spec": {"containers": [{"name": "x", "image": "skiff.local/absent:1", "imagePullPolicy": "Never"}]}
        }))
        .await;
    let waiting = cluster
        .wait_pod("noimage", LONG, "ErrImageNeverPull", |p| {
            container_status(p, "x")
                .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .as_deref()
                == Some("ErrImageNeverPull")
        })
        .await;
    assert_eq!(phase(&waiting), "Pending");

    // 5. A failing liveness probe restarts the container.
    cluster
        .create_pod(json!({
            "metadata": {"name": "lively"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "l", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", "touch /tmp/alive; exec sleep 3600"],
                    "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 1}
                }]
            }
        }))
        .await;
    let lively = cluster.wait_phase("lively", LONG, "Running").await;
    let first = container_id(&lively, "l");
    let (code, _) = exec(&cluster.cri, &first, &["rm", "/tmp/alive"]).await;
    assert_eq!(code, 0);
    let restarted = cluster
        .wait_pod(
            "lively",
            LONG,
            "a restart after the liveness failure",
            |p| {
                container_status(p, "l").is_some_and(|c| {
                    c.restart_count == 1
                        && c.state.as_ref().and_then(|s| s.running.as_ref()).is_some()
                })
            },
        )
        .await;
    assert_ne!(container_id(&restarted, "l"), first);

    // A probe whose command the image lacks cannot be run at all: as
    // upstream's kubelet, that says nothing of the container — it is told
    // in an event, and the container is neither restarted nor made ready.
    cluster
        .create_pod(json!({
            "metadata": {"name": "erring"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "e", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                    "livenessProbe": {"exec": {"command": ["/no/such/probe"]},
                                      "periodSeconds": 1, "failureThreshold": 1},
                    "readinessProbe": {"exec": {"command": ["/no/such/probe"]},
                                       "periodSeconds": 1}
                }]
            }
        }))
        .await;
    cluster.wait_phase("erring", LONG, "Running").await;
    let errored = "Liveness probe errored and resulted in unknown state: \
                   rpc error: code = Unknown desc = ";
    let mut told = Vec::new();
    for _ in 0..100 {
        told = events(&cluster, "involvedObject.name=erring,reason=Unhealthy").await;
        if told
            .iter()
            .filter_map(|e| e.message.as_deref())
            .any(|m| m.starts_with(errored))
            && told.iter().map(|e| e.count.unwrap_or(1)).sum::<i32>() >= 6
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let messages: Vec<_> = told.iter().filter_map(|e| e.message.clone()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with(errored) && m.contains("/no/such/probe")),
        "{messages:?}"
    );
    let erring = cluster.pods().get("erring").await.expect("erring");
    let status = container_status(&erring, "e").expect("e's status");
    assert_eq!(status.restart_count, 0, "{status:?}");
    assert!(!status.ready, "{status:?}");

    // 6. Graceful deletion: preStop runs, SIGTERM ends the container well
    //    before the grace period, the object is deleted by the agent.
    let marker_dir = cluster.api.dir().join("prestop");
    std::fs::create_dir_all(&marker_dir).expect("marker dir");
    cluster
        .create_pod(json!({
            "metadata": {"name": "graceful"},
            "spec": {
                "terminationGracePeriodSeconds": 20,
                "volumes": [{"name": "out", "hostPath": {"path": marker_dir.to_string_lossy()}}],
                "containers": [{
                    "name": "g", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", "trap 'echo term > /out/term; exit 0' TERM; while true; do sleep 0.2; done"],
                    "volumeMounts": [{"name": "out", "mountPath": "/out"}],
                    "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo prestop > /out/prestop"]}}}
                }]
            }
        }))
        .await;
    cluster.wait_phase("graceful", LONG, "Running").await;
    cluster.delete_pod("graceful").await;
    let took = cluster.wait_gone("graceful", Duration::from_secs(40)).await;
    assert!(
        took < Duration::from_secs(20),
        "deletion took {took:?}, the container ignored SIGTERM?"
    );
    assert_eq!(
        std::fs::read_to_string(marker_dir.join("prestop")).expect("preStop ran"),
        "prestop\n"
    );
    assert_eq!(
        std::fs::read_to_string(marker_dir.join("term")).expect("SIGTERM seen"),
        "term\n"
    );

    // 7. A pod killed on deletion (PID 1 ignores SIGTERM, so SIGKILL after
    //    its grace) reports how it ended before the agent's grace-0 delete:
    //    Failed even under restartPolicy Always, its container terminated
    //    with the kill's exit code. A finalizer keeps the object to look at.
    cluster
        .create_pod(json!({
            "metadata": {"name": "held", "finalizers": ["skiff.test/hold"]},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "h", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]
            }
        }))
        .await;
    cluster.wait_phase("held", LONG, "Running").await;
    cluster.delete_pod("held").await;
    let held = cluster.wait_final_delete("held", LONG).await;
    assert_eq!(phase(&held), "Failed", "{:?}", held.status);
    let state = container_status(&held, "h")
        .and_then(|c| c.state.clone())
        .expect("container state");
    let terminated = state.terminated.expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (137, Some("Error"))
    );
    assert!(
        condition(&held, "Ready").as_deref() == Some("False"),
        "{:?}",
        held.status
    );
    release(&cluster.pods(), "held").await;
    cluster.wait_gone("held", LONG).await;

    // Deleting the others removes their sandboxes from the runtime.
    for name in ["hello", "crasher", "reader", "noimage", "lively", "erring"] {
        cluster
            .pods()
            .delete(
                name,
                &DeleteParams {
                    grace_period_seconds: Some(1),
                    ..Default::default()
                },
            )
            .await
            .expect("delete");
    }
    for name in ["hello", "crasher", "reader", "noimage", "lively", "erring"] {
        cluster.wait_gone(name, LONG).await;
    }
    let left = cluster.sandboxes().await;
    assert!(left.is_empty(), "sandboxes left: {left:?}");
    cluster.teardown().await;
}

/// A pod's RuntimeClass picks the CRI handler its sandbox runs under:
/// `runc` (containerd's configured one) runs it, an unknown handler leaves
/// it waiting with the runtime's refusal in an event, and a class deleted
/// after the pod was admitted leaves it waiting with the API's words there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runtime_class_chooses_the_sandbox_handler() {
    // A slot of its own: a slot names the bridge, pod CIDR and cgroup root
    // that a test's clean-up removes, with whatever still runs there.
    let cluster = TestCluster::start(16).await;
    let classes = Api::<k8s_openapi::api::node::v1::RuntimeClass>::all(cluster.client.clone());
    for (name, handler) in [
        ("plain", "runc"),
        ("ghost", "no-such-handler"),
        ("gone", "runc"),
    ] {
        classes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}, "handler": handler}))
                    .expect("runtime class"),
            )
            .await
            .expect("create runtime class");
    }
    let pod = |name: &str, class: &str| {
        json!({
            "metadata": {"name": name},
            "spec": {
                "runtimeClassName": class,
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": BUSYBOX_IMAGE, "command": ["true"]}]
            }
        })
    };
    cluster.create_pod(pod("plain", "plain")).await;
    cluster.wait_phase("plain", LONG, "Succeeded").await;

    cluster.create_pod(pod("ghost", "ghost")).await;
    // `kubectl describe pod` shows why, as an event about the pod.
    wait_sandbox_refused(&cluster, "ghost", "no-such-handler").await;

    // A pod admitted while its class existed, bound after the class went
    // (nothing schedules in this cluster: the pod waits unbound until the
    // binding below).
    let unbound: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(pod("late", "gone")).expect("pod");
    cluster
        .pods()
        .create(&PostParams::default(), &unbound)
        .await
        .expect("create pod");
    classes
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete runtime class");
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "late"},
        "target": {"kind": "Node", "name": cluster.config.node_name}
    });
    cluster
        .pods()
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "late",
            &PostParams::default(),
            &binding,
        )
        .await
        .expect("bind pod");
    wait_sandbox_refused(
        &cluster,
        "late",
        "runtimeclass.node.k8s.io \"gone\" not found",
    )
    .await;
}

/// Waits until pod `name` has a Warning `FailedCreatePodSandBox` event
/// whose message holds `needle`, then checks that its `main` container
/// waits as a kubelet's does while there is no sandbox: ContainerCreating,
/// no message (the event says why), the pod Pending.
async fn wait_sandbox_refused(cluster: &TestCluster, name: &str, needle: &str) {
    let events =
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(cluster.client.clone(), "default");
    let selector = format!("involvedObject.name={name}");
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let listed = events
            .list(&kube::api::ListParams::default().fields(&selector))
            .await
            .expect("list events");
        let failed = listed.items.iter().find(|e| {
            e.reason.as_deref() == Some("FailedCreatePodSandBox")
                && e.type_.as_deref() == Some("Warning")
        });
        if let Some(event) = failed {
            let message = event.message.as_deref().unwrap_or("");
            assert!(
                message.starts_with("Failed to create pod sandbox: ") && message.contains(needle),
                "{message}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no FailedCreatePodSandBox event: {:?}",
            listed.items
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pod = cluster
        .wait_pod(name, LONG, "waiting for its sandbox", |p| {
            container_status(p, "main").is_some_and(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| {
                        w.reason.as_deref() == Some("ContainerCreating") && w.message.is_none()
                    })
            })
        })
        .await;
    assert_eq!(phase(&pod), "Pending");
}

/// What the container's cgroup allows it: CFS quota and memory limit, on
/// cgroup v2 (`cpu.max`, `memory.max`) or v1.
async fn cgroup_limits(cluster: &TestCluster, id: &str) -> String {
    let script = "if [ -f /sys/fs/cgroup/cpu.max ]; then \
                      read quota period < /sys/fs/cgroup/cpu.max; echo $quota; cat /sys/fs/cgroup/memory.max; \
                  else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/memory/memory.limit_in_bytes; fi";
    let (_, out) = exec(&cluster.cri, id, &["sh", "-c", script]).await;
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_are_resized_in_place_and_restarted_only_where_their_policy_says() {
    use kube::api::{Patch, PatchParams};
    let cluster = TestCluster::start_with(22, |c| c.sync_frequency = Duration::from_secs(1)).await;
    let pod = cluster
        .run_pod(
            json!({
                "metadata": {"name": "resized"},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "volumes": [{"name": "limits", "downwardAPI": {"items": [{"path": "cpu",
                        "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}]}}],
                    "containers": [{
                        "name": "app", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "limits", "mountPath": "/limits"}],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "32Mi"},
                            "limits": {"cpu": "200m", "memory": "64Mi"}},
                        "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
                    }]
                }
            }),
            LONG,
        )
        .await;
    let id = container_id(&pod, "app");
    assert_eq!(cgroup_limits(&cluster, &id).await, "20000 67108864");
    let resize = |body: serde_json::Value| {
        let pods = cluster.pods();
        async move {
            pods.patch_subresource(
                "resize",
                "resized",
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await
            .expect("resize")
        }
    };

    // CPU in place: the same container, its cgroup changed, the status says so.
    resize(json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": "200m"}, "limits": {"cpu": "500m"}}}]}}))
    .await;
    let resized = cluster
        .wait_pod("resized", LONG, "cpu resized", |p| {
            container_status(p, "app")
                .and_then(|s| s.resources.as_ref()?.limits.as_ref()?.get("cpu").cloned())
                .is_some_and(|q| q.0 == "500m")
        })
        .await;
    let status = container_status(&resized, "app").unwrap();
    assert_eq!(status.restart_count, 0);
    assert_eq!(container_id(&resized, "app"), id);
    assert_eq!(
        status.allocated_resources.as_ref().unwrap()["cpu"].0,
        "200m"
    );
    assert_eq!(cgroup_limits(&cluster, &id).await, "50000 67108864");
    // What the downward API says of the limit follows.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, limit) = exec(&cluster.cri, &id, &["cat", "/limits/cpu"]).await;
        if limit == "500" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "limits.cpu reads {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Memory with `RestartContainer`: a new instance with the new limit.
    resize(json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"memory": "48Mi"}, "limits": {"memory": "96Mi"}}}]}}))
    .await;
    let restarted = cluster
        .wait_pod("resized", LONG, "restarted with more memory", |p| {
            container_status(p, "app").is_some_and(|s| {
                s.restart_count == 1 && s.state.as_ref().is_some_and(|st| st.running.is_some())
            })
        })
        .await;
    let new_id = container_id(&restarted, "app");
    assert_ne!(new_id, id);
    assert_eq!(cgroup_limits(&cluster, &new_id).await, "50000 100663296");
    // Another such resize restarts it again at once: a container stopped
    // for a resize did not crash, so no crash back-off holds it (the
    // harness's is 2 s from the second restart on).
    resize(json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"memory": "40Mi"}, "limits": {"memory": "80Mi"}}}]}}))
    .await;
    let restarted = cluster
        .wait_pod("resized", LONG, "restarted with less memory", |p| {
            container_status(p, "app").is_some_and(|s| {
                s.restart_count == 2 && s.state.as_ref().is_some_and(|st| st.running.is_some())
            })
        })
        .await;
    let new_id = container_id(&restarted, "app");
    assert_eq!(cgroup_limits(&cluster, &new_id).await, "50000 83886080");
    let backoffs = events(&cluster, "involvedObject.name=resized,reason=BackOff").await;
    assert!(backoffs.is_empty(), "{backoffs:?}");

    // More than the node has: pending as Infeasible, nothing changes.
    resize(json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": "100"}, "limits": {"cpu": "100"}}}]}}))
    .await;
    let pending = cluster
        .wait_pod("resized", LONG, "PodResizePending", |p| {
            pod_condition(p, "PodResizePending").is_some()
        })
        .await;
    let condition = pod_condition(&pending, "PodResizePending").unwrap();
    assert_eq!(condition.reason.as_deref(), Some("Infeasible"));
    let message = condition.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Node didn't have enough capacity: cpu, requested: 100000, capacity: "),
        "{message}"
    );
    assert_eq!(cgroup_limits(&cluster, &new_id).await, "50000 83886080");
    let status = container_status(&pending, "app").unwrap();
    assert_eq!(
        status.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"].0,
        "500m"
    );

    // Back within the node: the condition goes, the new values apply.
    resize(json!({"spec": {"containers": [{"name": "app",
        "resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "1"}}}]}}))
    .await;
    cluster
        .wait_pod("resized", LONG, "resize applied", |p| {
            pod_condition(p, "PodResizePending").is_none()
                && container_status(p, "app")
                    .and_then(|s| s.resources.as_ref()?.limits.as_ref()?.get("cpu").cloned())
                    .is_some_and(|q| q.0 == "1")
        })
        .await;
    assert_eq!(cgroup_limits(&cluster, &new_id).await, "100000 83886080");
    cluster.teardown().await;
}
