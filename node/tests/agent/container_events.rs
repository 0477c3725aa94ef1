//! What `kubectl describe pod` lists of a pod's containers, as a kubelet
//! reports it: the image already present, created, started, a readiness
//! probe failing (in the probe's own words), stopped on deletion; and a
//! probe that names its port (`port: http`) reaching that port; lifecycle
//! hooks; the termination messages containers leave; and a pod stopped
//! at its active deadline; who containers run as (the pod's security
//! context and their own, runAsNonRoot); and the /etc/hosts they see; and
//! volumes that cannot be set up (a missing ConfigMap, a hostPath of the
//! wrong type) as the pod's FailedMount.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;
use skiff_testkit::eventually;

use crate::harness::{
    TestCluster, condition, container_status, events, init_container_status, pod_condition,
    sleeper, termination_message,
};

/// (fieldPath, reason, message) of the kubelet's events about pod `name`.
async fn pod_events(cluster: &TestCluster, name: &str) -> Vec<(String, String, String)> {
    let selector = format!("involvedObject.kind=Pod,involvedObject.name={name}");
    events(cluster, &selector)
        .await
        .into_iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet"))
        .map(|e| {
            (
                e.involved_object.field_path.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// Asserts that the node rejected pod `name` as a kubelet rejects a pod it
/// does not admit: failed with `reason` and "Pod was rejected: <why>" (`why`
/// starting so), the same in a Warning event, and no sandbox of it.
async fn assert_rejected(cluster: &TestCluster, name: &str, reason: &str, why: &str) {
    let rejected = cluster
        .wait_phase(name, Duration::from_secs(30), "Failed")
        .await;
    let status = rejected.status.clone().unwrap_or_default();
    let message = status.message.unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some(reason), "{message}");
    assert!(
        message.starts_with(&format!("Pod was rejected: {why}")),
        "{message}"
    );
    eventually(Duration::from_secs(10), "the rejection's event", || async {
        let events = pod_events(cluster, name).await;
        events
            .iter()
            .any(|(_, r, m)| r == reason && m.starts_with(why))
            .then_some(())
    })
    .await;
    let uid = rejected.metadata.uid.unwrap_or_default();
    assert!(
        !cluster
            .sandboxes()
            .await
            .iter()
            .any(|s| s.metadata.as_ref().is_some_and(|m| m.uid == uid)),
        "the rejected {name} got a sandbox"
    );
}

fn has(events: &[(String, String, String)], path: &str, reason: &str, message: &str) -> bool {
    events
        .iter()
        .any(|(p, r, m)| p == path && r == reason && m.starts_with(message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pods_containers_are_reported_as_a_kubelet_reports_them() {
    let cluster = TestCluster::start(7).await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "site"},
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {"name": "web", "image": BUSYBOX_IMAGE,
                     "command": ["sh", "-c", "echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"],
                     "ports": [{"name": "http", "containerPort": 8080}],
                     "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}},
                    {"name": "doubt", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                     "readinessProbe": {"exec": {"command": ["sh", "-c", "echo not yet; exit 1"]},
                                        "periodSeconds": 1}}
                ]
            }
        }))
        .await;
    // A node-local seccomp profile that lets everything but chmod through.
    let profiles = cluster.seccomp_root().join("profiles");
    std::fs::create_dir_all(&profiles).expect("profile dir");
    std::fs::write(
        profiles.join("deny-chmod.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["chmod", "fchmod", "fchmodat"], "action": "SCMP_ACT_ERRNO"}]}"#,
    )
    .expect("profile");
    // Who the containers run as: the pod's security context, a
    // container's own over it, and runAsNonRoot refusing an image's root.
    cluster
        .create_pod(json!({
            "metadata": {"name": "identity"},
            "spec": {
                "restartPolicy": "Never",
                "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                                    "supplementalGroups": [4000],
                                    "sysctls": [{"name": "net.ipv4.ip_local_port_range",
                                                 "value": "20000 30000"},
                                                {"name": "net/core/somaxconn", "value": "1000"}]},
                "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
                "containers": [
                    {"name": "hosts", "image": BUSYBOX_IMAGE,
                     "command": ["sh", "-c", "cat /etc/hosts > /dev/termination-log"]},
                    {"name": "sysctl", "image": BUSYBOX_IMAGE,
                     "command": ["sh", "-c", "cat /proc/sys/net/ipv4/ip_local_port_range /proc/sys/net/core/somaxconn > /dev/termination-log"]},
                    {"name": "pod-level", "image": BUSYBOX_IMAGE,
                     "command": ["sh", "-c", "id > /dev/termination-log"]},
                    {"name": "own", "image": BUSYBOX_IMAGE,
                     "securityContext": {"runAsUser": 2000, "allowPrivilegeEscalation": false,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "command": ["sh", "-c",
                                 "id -u > /dev/termination-log; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status >> /dev/termination-log"]},
                    {"name": "profiled", "image": BUSYBOX_IMAGE,
                     "securityContext": {"seccompProfile": {"type": "Localhost",
                                                            "localhostProfile": "profiles/deny-chmod.json"}},
                     "command": ["sh", "-c",
                                 "touch /tmp/f; chmod 600 /tmp/f 2> /dev/termination-log; echo \"exit $?\" >> /dev/termination-log"]}
                ]
            }
        }))
        .await;
    // A Localhost profile the node does not have. (One climbing out of the
    // profile directory never gets here: the API refuses it, and the node's
    // own check of it is a unit test of `security::verify_seccomp`.)
    cluster
        .create_pod(json!({
            "metadata": {"name": "unprofiled"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                                     "securityContext": {"seccompProfile":
                                         {"type": "Localhost", "localhostProfile": "profiles/missing.json"}}}]}
        }))
        .await;
    let rooted = cluster
        .create_pod(json!({
            "metadata": {"name": "rooted"},
            "spec": {"securityContext": {"runAsNonRoot": true},
                     "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    // Pods the node does not admit, rejected before they run: a sysctl
    // outside its allowlist, requests beyond what it has.
    cluster
        .create_pod(json!({
            "metadata": {"name": "forbidden"},
            "spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
                     "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "elsewhere"},
            "spec": {"nodeSelector": {"disk": "none"},
                     "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "greedy"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "1000"}}}]}
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "armoured"},
            "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    let pod = cluster
        .wait_pod("site", Duration::from_secs(60), "web ready", |p| {
            container_status(p, "web").is_some_and(|c| c.ready)
        })
        .await;
    let doubt = container_status(&pod, "doubt");
    assert!(doubt.is_some_and(|c| !c.ready), "{doubt:?}");

    let web = "spec.containers{web}";
    let present = format!("Container image \"{BUSYBOX_IMAGE}\" already present on machine");
    let events = eventually(Duration::from_secs(20), "the start's events", || async {
        let events = pod_events(&cluster, "site").await;
        (has(&events, web, "Pulled", &present)
            && has(&events, web, "Created", "Created container: web")
            && has(&events, web, "Started", "Started container web")
            && has(
                &events,
                "spec.containers{doubt}",
                "Unhealthy",
                "Readiness probe failed: not yet",
            ))
        .then_some(events)
    })
    .await;
    assert!(
        !events.iter().any(|(p, r, _)| p == web && r == "Unhealthy"),
        "the named port was probed: {events:?}"
    );

    let identity = cluster
        .wait_phase("identity", Duration::from_secs(60), "Succeeded")
        .await;
    let said = |name: &str| termination_message(&identity, name).unwrap_or_default();
    let pod_level = said("pod-level");
    assert!(
        pod_level.starts_with("uid=1000 gid=3000 ")
            && pod_level.contains("2000")
            && pod_level.contains("4000"),
        "{pod_level:?}"
    );
    assert_eq!(said("own"), "2000\nNoNewPrivs:\t1\nSeccomp:\t2\n");
    let profiled = said("profiled");
    assert!(
        profiled.contains("Operation not permitted") && profiled.ends_with("exit 1\n"),
        "the node's profile denies chmod: {profiled:?}"
    );
    assert_eq!(said("sysctl"), "20000\t30000\n1000\n");
    assert_rejected(
        &cluster,
        "forbidden",
        "SysctlForbidden",
        r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#,
    )
    .await;
    assert_rejected(
        &cluster,
        "elsewhere",
        "NodeAffinity",
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
    )
    .await;
    assert_rejected(
        &cluster,
        "greedy",
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 1000000, used: ",
    )
    .await;
    // A pod asking for confinement the host cannot give never runs
    // unconfined: without AppArmor in the kernel it is refused.
    let apparmor_on = std::fs::read("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|flag| flag.starts_with(b"Y"))
        && Path::new("/sys/kernel/security/apparmor").exists();
    if apparmor_on {
        cluster
            .wait_phase("armoured", Duration::from_secs(60), "Running")
            .await;
    } else {
        assert_rejected(
            &cluster,
            "armoured",
            "AppArmor",
            "Cannot enforce AppArmor: AppArmor is not enabled on the host",
        )
        .await;
    }
    // The managed /etc/hosts: loopback, the pod's own name, its aliases.
    let pod_ip = identity
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    let hosts = said("hosts");
    assert!(
        hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
            && hosts.contains(&format!("\n{pod_ip}\tidentity\n"))
            && hosts.ends_with("# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
        "{hosts:?}"
    );
    let uid = rooted.metadata.uid.clone().unwrap_or_default();
    let refusal = format!(
        "container has runAsNonRoot and image will run as root (pod: \"rooted_default({uid})\", container: c)"
    );
    cluster
        .wait_pod("rooted", Duration::from_secs(30), "the refusal", |p| {
            container_status(p, "c")
                .and_then(|c| c.state.as_ref()?.waiting.as_ref())
                .is_some_and(|w| {
                    w.reason.as_deref() == Some("CreateContainerConfigError")
                        && w.message.as_deref() == Some(refusal.as_str())
                })
        })
        .await;

    cluster
        .wait_pod(
            "unprofiled",
            Duration::from_secs(30),
            "CreateContainerError",
            |p| {
                container_status(p, "c")
                    .and_then(|c| c.state.as_ref()?.waiting.as_ref())
                    .is_some_and(|w| {
                        w.reason.as_deref() == Some("CreateContainerError")
                            && w.message
                                .as_deref()
                                .is_some_and(|m| m.contains("missing.json"))
                    })
            },
        )
        .await;

    cluster.delete_pod("site").await;
    eventually(Duration::from_secs(30), "the stop's event", || async {
        let events = pod_events(&cluster, "site").await;
        has(&events, web, "Killing", "Stopping container web").then_some(())
    })
    .await;
    cluster.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lifecycle_hooks_run_after_start_and_before_stop() {
    let cluster = TestCluster::start(0).await;
    // A sleeper with an active deadline, stopped when it passes.
    let mut late = sleeper("late", "sleeper");
    late["spec"]["activeDeadlineSeconds"] = json!(3);
    late["spec"]["terminationGracePeriodSeconds"] = json!(1);
    cluster.create_pod(late).await;
    // Termination messages: the file a container leaves (at the default
    // path and at its own), and the end of its log when it left none.
    cluster
        .create_pod(json!({
            "metadata": {"name": "ending"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "writes", "image": BUSYBOX_IMAGE,
                     "command": ["sh", "-c", "echo bye from writes > /dev/termination-log; exit 2"]},
                    {"name": "own-path", "image": BUSYBOX_IMAGE,
                     "terminationMessagePath": "/tmp/last-words",
                     "command": ["sh", "-c", "echo see you > /tmp/last-words"]},
                    {"name": "falls-back", "image": BUSYBOX_IMAGE,
                     "terminationMessagePolicy": "FallbackToLogsOnError",
                     "command": ["sh", "-c", "echo first; echo last words; exit 1"]}
                ]
            }
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "hooked"},
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "volumes": [{"name": "shared", "emptyDir": {}}],
                "containers": [
                    // Ready only once its postStart hook has written the file.
                    {"name": "main", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                     "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                     "lifecycle": {
                         "postStart": {"exec": {"command": ["sh", "-c", "echo up > /shared/post"]}},
                         "preStop": {"exec": {"command": ["sh", "-c", "echo draining; exit 7"]}}},
                     "readinessProbe": {"exec": {"command": ["test", "-f", "/shared/post"]},
                                        "periodSeconds": 1}},
                    // Its postStart hook fails: it is killed and started again.
                    {"name": "broken", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                     "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}}}
                ]
            }
        }))
        .await;
    cluster
        .wait_pod(
            "hooked",
            Duration::from_secs(60),
            "main ready and broken restarted",
            |p| {
                container_status(p, "main").is_some_and(|c| c.ready)
                    && container_status(p, "broken").is_some_and(|c| c.restart_count >= 1)
            },
        )
        .await;
    let ended = cluster
        .wait_phase("ending", Duration::from_secs(60), "Failed")
        .await;

    // A pod past its activeDeadlineSeconds is stopped and fails.
    let late = cluster
        .wait_phase("late", Duration::from_secs(60), "Failed")
        .await;
    let status = late.status.clone().unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    let slept = status.container_statuses.unwrap_or_default();
    assert!(
        slept.iter().all(|c| c
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some()),
        "{slept:?}"
    );
    let message = |name: &str| termination_message(&ended, name);
    assert_eq!(message("writes").as_deref(), Some("bye from writes\n"));
    assert_eq!(message("own-path").as_deref(), Some("see you\n"));
    let fell_back = message("falls-back").unwrap_or_default();
    assert!(fell_back.ends_with("first\nlast words\n"), "{fell_back:?}");

    let broken = "spec.containers{broken}";
    eventually(
        Duration::from_secs(20),
        "the failed postStart's events",
        || async {
            let events = pod_events(&cluster, "hooked").await;
            (has(
                &events,
                broken,
                "FailedPostStartHook",
                "PostStartHook failed",
            ) && has(&events, broken, "Killing", "FailedPostStartHook"))
            .then_some(())
        },
    )
    .await;

    cluster.delete_pod("hooked").await;
    let events = eventually(
        Duration::from_secs(30),
        "the failed preStop's event",
        || async {
            let events = pod_events(&cluster, "hooked").await;
            events
                .iter()
                .find(|(p, r, _)| p == "spec.containers{main}" && r == "FailedPreStopHook")
                .map(|(_, _, m)| m.clone())
        },
    )
    .await;
    assert!(
        events.starts_with("Exec lifecycle hook ([sh -c echo draining; exit 7]) for Container \"main\" in Pod \"hooked_default(")
            && events.contains("exited with 7")
            && events.contains("draining"),
        "{events}"
    );
    cluster.teardown().await;
}

/// (type, reason, message, count) of the kubelet's events about container
/// `container` of pod `name`.
async fn container_events_of(
    cluster: &TestCluster,
    name: &str,
    container: &str,
) -> Vec<(String, String, String, i32)> {
    let selector = format!("involvedObject.kind=Pod,involvedObject.name={name}");
    let path = format!("spec.containers{{{container}}}");
    events(cluster, &selector)
        .await
        .into_iter()
        .filter(|e| e.involved_object.field_path.as_deref() == Some(path.as_str()))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.count.unwrap_or(1),
            )
        })
        .collect()
}

/// The waiting (reason, message) of container `container` of `pod`.
fn waiting(pod: &k8s_openapi::api::core::v1::Pod, container: &str) -> Option<(String, String)> {
    let w = container_status(pod, container)?
        .state
        .as_ref()?
        .waiting
        .clone()?;
    Some((w.reason.unwrap_or_default(), w.message.unwrap_or_default()))
}

/// Waits (30 s at most) for the warning FailedMount of pod `name` saying
/// `message`.
async fn failed_mount(cluster: &TestCluster, name: &str, message: &str) {
    let selector = format!("involvedObject.kind=Pod,involvedObject.name={name}");
    eventually(
        Duration::from_secs(30),
        &format!("{name}: FailedMount"),
        || async {
            events(cluster, &selector)
                .await
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("FailedMount")
                        && e.type_.as_deref() == Some("Warning")
                        && e.message.as_deref() == Some(message)
                })
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn containers_that_cannot_start_are_reported_as_a_kubelet_reports_them() {
    let cluster = TestCluster::start_with(13, |c| {
        c.image_backoff = skiff_node::agent::pod::backoff::BackoffConfig {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(4),
            reset_after: Duration::from_secs(600),
        };
    })
    .await;
    // No registry answers for skiff.local: the pull fails every time.
    let absent = "skiff.local/absent:1";
    cluster
        .create_pod(json!({
            "metadata": {"name": "unpullable"},
            "spec": {"containers": [{"name": "c", "image": absent, "imagePullPolicy": "IfNotPresent"}]}
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "never"},
            "spec": {"containers": [{"name": "c", "image": absent, "imagePullPolicy": "Never"}]}
        }))
        .await;
    cluster
        .create_configmap(json!({"metadata": {"name": "settings"}, "data": {"there": "v"}}))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "keyless"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                "env": [{"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "gone"}}}]}]}
        }))
        .await;

    // A hostPath volume whose path is not of its type.
    cluster
        .create_pod(json!({
            "metadata": {"name": "wrong-host-path"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "sock", "mountPath": "/sock"}]}],
                "volumes": [{"name": "sock", "hostPath": {"path": "/etc/hostname", "type": "Socket"}}]}
        }))
        .await;

    // A configMap volume whose ConfigMap is missing, in a pod without init
    // containers and in the same pod with one.
    let mountless = json!({
        "metadata": {"name": "mountless"},
        "spec": {"volumes": [{"name": "cfg", "configMap": {"name": "missing-cm"}}],
                 "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                                 "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}]}
    });
    let mut mountless_init = mountless.clone();
    mountless_init["metadata"]["name"] = json!("mountless-init");
    mountless_init["spec"]["initContainers"] =
        json!([{"name": "setup", "image": BUSYBOX_IMAGE, "command": ["true"]}]);
    cluster.create_pod(mountless).await;
    cluster.create_pod(mountless_init).await;
    // A command that is not in the image: its start fails (StartError)
    // and it is restarted with back-off, as any container that exits.
    cluster
        .create_pod(json!({
            "metadata": {"name": "badcmd"},
            "spec": {"containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["/no/such/binary"]}]}
        }))
        .await;

    // A failed pull: the registry's error alone (no CRI call name), then
    // back-off with that error in the waiting message, the pull retried
    // once the back-off has passed.
    let pulling = format!("Pulling image \"{absent}\"");
    let failed = format!("Failed to pull image \"{absent}\": ");
    let backing_off = format!("Back-off pulling image \"{absent}\"");
    let seen = eventually(Duration::from_secs(60), "the pull's events", || async {
        let events = container_events_of(&cluster, "unpullable", "c").await;
        let with = |kind: &str, reason: &str, message: &str| {
            events
                .iter()
                .find(|(t, r, m, _)| t == kind && r == reason && m.starts_with(message))
                .cloned()
        };
        let retried = with("Normal", "Pulling", &pulling).is_some_and(|e| e.3 >= 2);
        (retried
            && with("Warning", "Failed", "Error: ErrImagePull").is_some()
            && with("Normal", "BackOff", &backing_off).is_some()
            && with("Warning", "Failed", "Error: ImagePullBackOff").is_some())
        .then(|| with("Warning", "Failed", &failed))
        .flatten()
    })
    .await;
    let error = seen.2.strip_prefix(&failed).unwrap_or_default().to_string();
    assert!(
        !error.is_empty() && !error.contains("CRI PullImage"),
        "{seen:?}"
    );
    let backing_off_with = format!("{backing_off}: ErrImagePull: ");
    let pod = cluster
        .wait_pod(
            "unpullable",
            Duration::from_secs(30),
            "ImagePullBackOff",
            |p| {
                waiting(p, "c").is_some_and(|(r, m)| {
                    r == "ImagePullBackOff" && m.starts_with(&backing_off_with)
                })
            },
        )
        .await;
    assert!(
        !waiting(&pod, "c")
            .unwrap_or_default()
            .1
            .contains("CRI PullImage"),
        "{pod:?}"
    );

    // Pull policy Never and no image: its own event, then the error.
    let never = format!("Container image \"{absent}\" is not present with pull policy of Never");
    eventually(Duration::from_secs(30), "the Never events", || async {
        let events = container_events_of(&cluster, "never", "c").await;
        let with = |kind: &str, reason: &str, message: &str| {
            events
                .iter()
                .any(|(t, r, m, _)| t == kind && r == reason && m == message)
        };
        (with("Warning", "ErrImageNeverPull", &never)
            && with("Warning", "Failed", "Error: ErrImageNeverPull"))
        .then_some(())
    })
    .await;

    // A key the ConfigMap lacks, in upstream's words, in the waiting
    // message and an event.
    let lacking = "couldn't find key gone in ConfigMap default/settings";
    cluster
        .wait_pod(
            "keyless",
            Duration::from_secs(60),
            "CreateContainerConfigError",
            |p| {
                waiting(p, "c")
                    == Some((
                        "CreateContainerConfigError".to_string(),
                        lacking.to_string(),
                    ))
            },
        )
        .await;
    let error = format!("Error: {lacking}");
    eventually(
        Duration::from_secs(20),
        "the config error's event",
        || async {
            let events = container_events_of(&cluster, "keyless", "c").await;
            events
                .iter()
                .any(|(t, r, m, _)| t == "Warning" && r == "Failed" && *m == error)
                .then_some(())
        },
    )
    .await;
    // The volume that cannot be set up: said in the pod's FailedMount
    // event, the container waiting without a message, as a kubelet's.
    failed_mount(
        &cluster,
        "mountless",
        r#"MountVolume.SetUp failed for volume "cfg" : configmap "missing-cm" not found"#,
    )
    .await;
    failed_mount(
        &cluster,
        "wrong-host-path",
        r#"MountVolume.SetUp failed for volume "sock" : hostPath type check failed: /etc/hostname is not a socket file"#,
    )
    .await;
    let mountless = cluster.pods().get("mountless").await.expect("pod");
    assert_eq!(
        waiting(&mountless, "c"),
        Some(("ContainerCreating".to_string(), String::new()))
    );
    // Without init containers the pod is initialized all the same.
    assert_eq!(
        condition(&mountless, "Initialized").as_deref(),
        Some("True")
    );
    // With them, everything waits as PodInitializing (`Init:0/1`).
    let with_init = cluster
        .wait_pod(
            "mountless-init",
            Duration::from_secs(30),
            "PodInitializing",
            |p| waiting(p, "c").is_some_and(|(r, _)| r == "PodInitializing"),
        )
        .await;
    let setup = init_container_status(&with_init, "setup")
        .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref());
    assert_eq!(setup, Some("PodInitializing"));
    let initialized = pod_condition(&with_init, "Initialized").expect("condition");
    assert_eq!(
        (initialized.status.as_str(), initialized.message.as_deref()),
        ("False", Some("containers with incomplete status: [setup]"))
    );

    // The failed start backs off (the agent's back-off here is 2 s
    // doubling to 4 s): a handful of restarts, not one every sync.
    let backing_off = cluster
        .wait_pod("badcmd", Duration::from_secs(60), "CrashLoopBackOff", |p| {
            waiting(p, "c").is_some_and(|(r, _)| r == "CrashLoopBackOff")
        })
        .await;
    let c = container_status(&backing_off, "c").expect("status");
    let last = c
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("last state");
    assert_eq!(last.reason.as_deref(), Some("StartError"), "{last:?}");
    assert_eq!(last.exit_code, 128, "{last:?}");
    let started = serde_json::to_value(&last.started_at).expect("time");
    assert_eq!(started, "1970-01-01T00:00:00Z", "{last:?}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let later = cluster.pods().get("badcmd").await.expect("pod");
    let restarts = container_status(&later, "c").map_or(0, |c| c.restart_count);
    assert!(restarts <= 6, "restarted {restarts} times within seconds");
    cluster.teardown().await;
}
