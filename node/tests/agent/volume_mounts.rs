//! Volume mounts on real containerd. Secrets and memory emptyDirs are
//! tmpfs mounts (the emptyDir capped at its sizeLimit). Parts of a volume: a directory, a file
//! of a configMap (through its `..data` links) and a `subPathExpr` are
//! mounted; a symbolic link the pod planted in its own volume pointing at
//! the host is refused, as upstream refuses it, and nothing of the host is
//! mounted; the pinned mounts are gone with the pod. Mount propagation: what
//! a privileged container mounts under a `Bidirectional` volume reaches a
//! `HostToContainer` one through the host, and is detached with the pod.

use std::time::Duration;

use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::{TestCluster, container_id, container_status, exec};

const LONG: Duration = Duration::from_secs(60);

/// The mount points of this process's mount table under `dir`.
fn mounts_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| point.starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// Asserts each shell command run in the container `id` succeeds and
/// prints what it is paired with.
async fn says(cluster: &TestCluster, id: &str, cases: &[(&str, &str)]) {
    for (command, want) in cases {
        let (code, out) = exec(&cluster.cri, id, &["sh", "-c", command]).await;
        assert_eq!((code, out.as_str()), (0, *want), "{command}");
    }
}

/// Deletes the pod `name` and waits until its directory `pod_dir` is gone,
/// with no mount left under it.
async fn assert_gone_with_its_mounts(cluster: &TestCluster, name: &str, pod_dir: &std::path::Path) {
    cluster.delete_pod(name).await;
    cluster.wait_gone(name, LONG).await;
    for _ in 0..100 {
        if !pod_dir.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!pod_dir.exists(), "{name}: the pod's directory is removed");
    assert!(
        mounts_under(pod_dir).is_empty(),
        "{name}: {:?}",
        mounts_under(pod_dir)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sub_paths_stay_inside_their_volume() {
    let cluster = TestCluster::start(19).await;
    cluster
        .create_configmap(json!({
            "metadata": {"name": "settings"},
            "data": {"app.conf": "mode=edge\n", "other": "x"}
        }))
        .await;
    let plant = |links: &str| {
        json!({
            "name": "plant", "image": BUSYBOX_IMAGE,
            "command": ["sh", "-c", format!("mkdir -p /data/ok && echo inside > /data/ok/note && {links}")],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]
        })
    };

    // Parts of volumes that stay inside them are mounted.
    cluster
        .create_pod(json!({
            "metadata": {"name": "inside"},
            "spec": {
                "volumes": [
                    {"name": "data", "emptyDir": {}},
                    {"name": "cfg", "configMap": {"name": "settings"}}
                ],
                "initContainers": [plant("ln -s ok /data/alias")],
                "containers": [{
                    "name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                    "env": [{"name": "DIR", "value": "ok"}],
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/ok", "subPath": "ok"},
                        {"name": "data", "mountPath": "/alias", "subPath": "alias"},
                        {"name": "data", "mountPath": "/expr", "subPathExpr": "$(DIR)"},
                        {"name": "data", "mountPath": "/made", "subPath": "new/dir"},
                        {"name": "cfg", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
                        {"name": "cfg", "mountPath": "/cfg"}
                    ]
                }]
            }
        }))
        .await;
    let running = cluster.wait_phase("inside", LONG, "Running").await;
    let id = container_id(&running, "c");
    says(
        &cluster,
        &id,
        &[
            ("cat /ok/note", "inside\n"),
            ("cat /alias/note", "inside\n"),
            ("cat /expr/note", "inside\n"),
            ("cat /etc/app.conf", "mode=edge\n"),
            ("test -d /made && echo dir", "dir\n"),
            ("cat /cfg/other", "x"),
        ],
    )
    .await;
    // What the agent writes is read-only to the pod, even without
    // `readOnly`: no link can be planted for the agent's next write.
    for command in [
        "echo x > /cfg/new",
        "ln -sfn / /cfg/..data",
        "rm /cfg/other",
    ] {
        let (code, _) = exec(&cluster.cri, &id, &["sh", "-c", command]).await;
        assert_ne!(code, 0, "{command} succeeded");
    }
    let uid = running.metadata.uid.clone().unwrap_or_default();
    let pod_dir = cluster.config.agent_dir().join("pods").join(&uid);
    assert_eq!(
        mounts_under(&pod_dir.join("volume-subpaths")).len(),
        5,
        "one pinned mount per sub path"
    );

    // Secrets and memory emptyDirs live on a tmpfs: never on the disk, and
    // the emptyDir no bigger than its sizeLimit.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(cluster.client.clone(), "default");
    secrets
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "creds"},
                "stringData": {"password": "s3cret"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    cluster
        .create_pod(json!({
            "metadata": {"name": "memory"},
            "spec": {
                "volumes": [
                    {"name": "creds", "secret": {"secretName": "creds"}},
                    {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
                ],
                "containers": [{
                    "name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                    "volumeMounts": [
                        {"name": "creds", "mountPath": "/creds"},
                        {"name": "scratch", "mountPath": "/scratch"}
                    ]
                }]
            }
        }))
        .await;
    let memory = cluster.wait_phase("memory", LONG, "Running").await;
    let id = container_id(&memory, "c");
    says(
        &cluster,
        &id,
        &[
            ("cat /creds/password", "s3cret"),
            ("grep -w /creds /proc/mounts | cut -d' ' -f3", "tmpfs\n"),
            ("grep -w /scratch /proc/mounts | cut -d' ' -f3", "tmpfs\n"),
        ],
    )
    .await;
    let (code, _) = exec(
        &cluster.cri,
        &id,
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/scratch/big bs=1024 count=2048",
        ],
    )
    .await;
    assert_ne!(code, 0, "2 MiB fit in a 1Mi memory emptyDir");
    let memory_dir = cluster
        .config
        .agent_dir()
        .join("pods")
        .join(memory.metadata.uid.clone().unwrap_or_default());
    assert_eq!(
        mounts_under(&memory_dir.join("volumes")).len(),
        2,
        "{:?}",
        mounts_under(&memory_dir)
    );

    // A link the pod wrote into its own volume, pointing at the host's
    // root or a host file: the container is refused, in upstream's words.
    for (name, link, sub) in [
        ("escape", "ln -s / /data/escape", "escape"),
        (
            "escape-file",
            "ln -s /etc/hostname /data/host-file",
            "host-file",
        ),
        ("escape-below", "ln -s / /data/escape", "escape/etc"),
    ] {
        cluster
            .create_pod(json!({
                "metadata": {"name": name},
                "spec": {
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "initContainers": [plant(link)],
                    "containers": [{
                        "name": "main", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "data", "mountPath": "/host", "subPath": sub}]
                    }]
                }
            }))
            .await;
        let refused = cluster
            .wait_pod(name, LONG, "CreateContainerConfigError", |p| {
                container_status(p, "main")
                    .and_then(|c| c.state.as_ref()?.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
            })
            .await;
        let waiting = container_status(&refused, "main")
            .and_then(|c| c.state.clone()?.waiting)
            .expect("waiting");
        assert_eq!(
            waiting.message.as_deref(),
            Some("failed to prepare subPath for volumeMount \"data\" of container \"main\""),
            "{name}"
        );
        assert!(
            container_status(&refused, "main")
                .and_then(|c| c.container_id.clone())
                .is_none(),
            "{name}: no container was created"
        );
        let uid = refused.metadata.uid.clone().unwrap_or_default();
        let dir = cluster.config.agent_dir().join("pods").join(uid);
        assert!(
            mounts_under(&dir).is_empty(),
            "{name}: nothing of the host mounted: {:?}",
            mounts_under(&dir)
        );
    }

    // With the pod gone, its pinned mounts are detached (the volume's
    // content went with the pod's directory, the host's did not).
    assert_gone_with_its_mounts(&cluster, "inside", &pod_dir).await;
    assert!(std::path::Path::new("/etc/hostname").exists());
    cluster.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mounts_propagate_between_containers_through_the_host() {
    let cluster = TestCluster::start(20).await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "propagation"},
            "spec": {
                "volumes": [{"name": "shared", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "maker", "image": BUSYBOX_IMAGE,
                        "securityContext": {"privileged": true},
                        "command": ["sh", "-c", "mkdir -p /shared/inner && mount -t tmpfs tmpfs /shared/inner && echo hello > /shared/inner/note && exec sleep 3600"],
                        "volumeMounts": [{"name": "shared", "mountPath": "/shared", "mountPropagation": "Bidirectional"}]
                    },
                    {
                        "name": "viewer", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "shared", "mountPath": "/shared", "mountPropagation": "HostToContainer"}]
                    }
                ]
            }
        }))
        .await;
    let running = cluster.wait_phase("propagation", LONG, "Running").await;
    let viewer = container_id(&running, "viewer");
    let mut seen = (1, String::new());
    for _ in 0..100 {
        seen = exec(&cluster.cri, &viewer, &["cat", "/shared/inner/note"]).await;
        if seen.0 == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        (seen.0, seen.1.as_str()),
        (0, "hello\n"),
        "the maker's mount reached the viewer"
    );
    let uid = running.metadata.uid.clone().unwrap_or_default();
    let pod_dir = cluster.config.agent_dir().join("pods").join(&uid);
    assert!(
        mounts_under(&pod_dir.join("volumes"))
            .iter()
            .any(|p| p.ends_with("/inner")),
        "the maker's mount is on the host: {:?}",
        mounts_under(&pod_dir)
    );

    // Gone with the pod: detached before its directory is removed.
    assert_gone_with_its_mounts(&cluster, "propagation", &pod_dir).await;
    cluster.teardown().await;
}

/// Execs `cat` of `files` in the container until its output holds every
/// one of `want`, for up to 30 s; returns the last output.
async fn read_until(cluster: &TestCluster, id: &str, files: &[&str], want: &[&str]) -> String {
    let mut cmd = vec!["cat"];
    cmd.extend_from_slice(files);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, out) = exec(&cluster.cri, id, &cmd).await;
        if want.iter().all(|w| out.contains(w)) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "wanted {want:?} in {files:?}, read {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_sourced_volumes_follow_their_sources_while_the_pod_runs() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::Api;
    use kube::api::{Patch, PatchParams};

    let cluster = TestCluster::start_with(21, |c| c.sync_frequency = Duration::from_secs(1)).await;
    cluster
        .create_configmap(json!({
            "metadata": {"name": "settings"},
            "data": {"greeting": "one", "extra": "x"}
        }))
        .await;
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"pw": "first"}
    }))
    .unwrap();
    secrets.create(&Default::default(), &secret).await.unwrap();
    // The account the projected token is for (no controller makes it here).
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(cluster.client.clone(), "default");
    let account = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    accounts
        .create(&Default::default(), &account)
        .await
        .unwrap();
    let pod = cluster
        .run_pod(
            json!({
                "metadata": {"name": "follower", "labels": {"tier": "a"}},
                "spec": {
                    // Only the volumes below (no kube-root-ca.crt here).
                    "automountServiceAccountToken": false,
                    "volumes": [
                        {"name": "cfg", "configMap": {"name": "settings"}},
                        {"name": "sec", "secret": {"secretName": "creds"}},
                        {"name": "down", "downwardAPI": {"items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                        {"name": "proj", "projected": {"sources": [
                            {"configMap": {"name": "settings", "items": [{"key": "greeting", "path": "g"}]}},
                            {"serviceAccountToken": {"path": "token"}}]}}
                    ],
                    "containers": [{
                        "name": "app", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                        "volumeMounts": [
                            {"name": "cfg", "mountPath": "/cfg"},
                            {"name": "cfg", "mountPath": "/pinned", "subPath": "greeting"},
                            {"name": "sec", "mountPath": "/sec"},
                            {"name": "down", "mountPath": "/down"},
                            {"name": "proj", "mountPath": "/proj"}
                        ]
                    }]
                }
            }),
            LONG,
        )
        .await;
    let id = container_id(&pod, "app");
    let (_, listing) = exec(&cluster.cri, &id, &["ls", "-l", "/cfg"]).await;
    assert!(
        listing.contains("greeting -> ..data/greeting"),
        "upstream's layout: {listing}"
    );
    let first = read_until(
        &cluster,
        &id,
        &["/cfg/greeting", "/sec/pw", "/down/labels", "/proj/g"],
        &["one", "first", "tier=\"a\""],
    )
    .await;
    assert!(first.starts_with("onefirsttier=\"a\"one"), "{first}");
    let (_, token) = exec(&cluster.cri, &id, &["cat", "/proj/token"]).await;

    // Every source changes; a key goes away and one comes.
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    configmaps
        .replace(
            "settings",
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "settings"},
                "data": {"greeting": "two", "added": "y"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let merge = |v| Patch::Merge(v);
    secrets
        .patch(
            "creds",
            &PatchParams::default(),
            &merge(json!({"stringData": {"pw": "second"}})),
        )
        .await
        .unwrap();
    cluster
        .pods()
        .patch(
            "follower",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"tier": "b"}}})),
        )
        .await
        .unwrap();
    let updated = read_until(
        &cluster,
        &id,
        &[
            "/cfg/greeting",
            "/cfg/added",
            "/sec/pw",
            "/down/labels",
            "/proj/g",
        ],
        // The projected copy of `greeting` updates on its own.
        &["twoy", "second", "tier=\"b\"two"],
    )
    .await;
    assert!(updated.starts_with("twoysecondtier=\"b\"two"), "{updated}");
    let (code, _) = exec(&cluster.cri, &id, &["test", "-e", "/cfg/extra"]).await;
    assert_ne!(
        code, 0,
        "a key removed from the ConfigMap is gone from the volume"
    );
    // A subPath mount pins the file it was made of, as upstream's does.
    let (_, pinned) = exec(&cluster.cri, &id, &["cat", "/pinned"]).await;
    assert_eq!(pinned, "one");
    // Resyncs every second asked for no new token.
    let (_, token_now) = exec(&cluster.cri, &id, &["cat", "/proj/token"]).await;
    assert_eq!(token_now, token);

    // The ConfigMap deleted: the running pod keeps what it had, and says why
    // the volume cannot be brought up to date.
    configmaps
        .delete("settings", &Default::default())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let failed =
            crate::harness::events(&cluster, "involvedObject.name=follower,reason=FailedMount")
                .await;
        if let Some(event) = failed.first() {
            assert_eq!(
                event.message.as_deref(),
                Some(
                    "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found"
                )
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no FailedMount event");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (_, kept) = exec(&cluster.cri, &id, &["cat", "/cfg/greeting"]).await;
    assert_eq!(kept, "two");
    cluster.teardown().await;
}
