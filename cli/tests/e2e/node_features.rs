//! Node agent features on real containerd, driven by kubectl and `skiff
//! images`: images imported with `skiff images import` and listed; pods
//! reading their service-account token (used from the host with `kubectl
//! --token`, refused once the pod is gone) and `kubectl create token`;
//! persistentVolumeClaim volumes (a static hostPath PV, a missing claim with
//! its FailedMount event, a local-path claim provisioned on first use, kept
//! while in use after its deletion and removed with its volume once free); pull
//! secrets reaching a registry on loopback, a `registries.yaml` mirror with
//! its credentials reaching it for an image of another name, and
//! ImagePullBackOff. Needs root.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_node::agent::pod::logs::{self, LogOptions, LogTarget};
use skiff_node::images;

use super::containerd::{pod, run_with_node, wait_node_ready};
use super::support::{
    Server, apply, assert_contains, bind_account, eventually, field_pairs, json, skiff_ok,
};

const NODE: &str = "e2e-node-features";
const IMAGE: &str = "skiff.test/tools:v7";
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A registry on loopback that asks for Basic credentials, records every
/// Authorization header it gets, and never serves an image.
struct RecordingRegistry {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl RecordingRegistry {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("registry port");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        record.lock().unwrap().push(value.trim().to_string());
                    }
                    line.clear();
                }
                let _ = reader.get_mut().write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"skiff-test\"\r\n\
                      Docker-Distribution-API-Version: registry/2.0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Self { port, seen }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn saw(&self, header: &str) -> bool {
        self.seen.lock().unwrap().iter().any(|h| h == header)
    }
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

fn skiff_images(server: &Server, args: &[&str]) -> String {
    skiff_ok(&[&["images"], args].concat(), server.data_dir())
}

fn container_log(server: &Server, name: &str, uid: &str) -> String {
    let log_root = server.data_dir().join("agent/logs/pods");
    let target = LogTarget {
        log_root: &log_root,
        namespace: "default",
        name,
        uid,
        container: "main",
    };
    logs::read(&target, &LogOptions::default())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn waiting_reason(server: &Server, name: &str) -> Option<String> {
    pod(server, name)["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        .as_str()
        .map(str::to_string)
}

fn events_of(server: &Server, name: &str) -> Vec<(String, String)> {
    let selector = format!("involvedObject.name={name}");
    let list = json(&server.events_with(&selector, &["-o", "json"]));
    field_pairs(&list["items"], "reason", "message")
}

fn running(server: &Server, name: &str) -> Option<serde_json::Value> {
    let p = pod(server, name);
    (p["status"]["phase"] == "Running").then_some(p)
}

/// A pod on this node running `script` in the imported image.
fn shell_pod(name: &str, script: &str, extra_spec: &str) -> String {
    let script = serde_json::to_string(script).expect("script");
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},
           "spec":{{{extra_spec}"terminationGracePeriodSeconds":1,"containers":[{{
             "name":"main","image":"{IMAGE}","imagePullPolicy":"Never",
             "command":["sh","-c",{script}]}}]}}}}"#
    )
}

/// A deleted claim its pod still mounts stays, Terminating, with its data;
/// a new pod may not start with it. Once the pod is gone the claim goes, and
/// its local-path volume (reclaim policy Delete) goes with its directory.
fn claim_lifecycle(server: &Server, volume: &str, dir: &Path) {
    server.kubectl_ok(&["delete", "pvc", "scratch", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    let claim = json(&server.kubectl_ok(&["get", "pvc", "scratch", "-o", "json"]));
    assert!(
        claim["metadata"]["deletionTimestamp"].is_string(),
        "{claim}"
    );
    assert_contains(
        &server.kubectl_ok(&["get", "pvc", "scratch"]),
        "Terminating",
    );
    assert!(
        dir.join("out.txt").exists(),
        "the data stays while the pod runs"
    );
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"late-user"}},
               "spec":{{"nodeName":"{NODE}","terminationGracePeriodSeconds":1,
                 "volumes":[{{"name":"data","persistentVolumeClaim":{{"claimName":"scratch"}}}}],
                 "containers":[{{"name":"main","image":"{IMAGE}","imagePullPolicy":"Never",
                   "command":["sleep","3600"],"volumeMounts":[{{"name":"data","mountPath":"/data"}}]}}]}}}}"#
        ),
    );
    eventually(
        Duration::from_secs(30),
        "late-user refused the claim",
        || {
            events_of(server, "late-user")
                .iter()
                .any(|(reason, message)| {
                    reason == "FailedMount" && message.contains("is being deleted")
                })
                .then_some(())
        },
    );
    server.kubectl_ok(&["delete", "pod", "local-user", "late-user"]);
    eventually(Duration::from_secs(60), "the claim gone", || {
        let out = server.kubectl(&["get", "pvc", "scratch"]);
        String::from_utf8_lossy(&out.stderr)
            .contains("NotFound")
            .then_some(())
    });
    eventually(Duration::from_secs(60), "its volume deleted", || {
        let out = server.kubectl(&["get", "pv", volume]);
        (String::from_utf8_lossy(&out.stderr).contains("NotFound") && !dir.exists()).then_some(())
    });
}

#[test]
fn node_features_on_containerd() {
    let registry = RecordingRegistry::start();
    // `--private-registry`: a made-up registry name mirrored to the
    // recording registry, with credentials for it.
    let config = tempfile::tempdir().expect("config dir");
    let registries = config.path().join("registries.yaml");
    std::fs::write(
        &registries,
        format!(
            "mirrors:\n  {MIRRORED}:\n    endpoint:\n      - \"http://{host}\"\n\
             configs:\n  \"{host}\":\n    auth:\n      username: carol\n      password: mirror-pw\n",
            host = registry.host()
        ),
    )
    .expect("registries.yaml");
    let registries = registries.to_string_lossy().into_owned();
    run_with_node(
        "skf",
        "10.233.10.0/24",
        NODE,
        &["--private-registry", &registries],
        |server| scenario(server, &registry),
    );
}

/// The registry name `registries.yaml` mirrors to the recording registry.
const MIRRORED: &str = "mirror.skiff.test";

fn scenario(server: &Server, registry: &RecordingRegistry) {
    wait_node_ready(server, NODE);

    // `skiff images import` / `list` against the running node.
    let archive = server.data_dir().join("tools.tar");
    images::busybox_image(Path::new(images::builtin::HOST_BUSYBOX), IMAGE)
        .expect("busybox image")
        .write_docker_archive(&archive)
        .expect("archive");
    let imported = skiff_images(server, &["import", &archive.to_string_lossy()]);
    assert_eq!(imported.trim(), format!("imported {IMAGE}"));
    let listed = skiff_images(server, &["list"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("skiff.test/tools "))
        .unwrap_or_else(|| panic!("imported image not listed:\n{listed}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "v7", "{row}");
    assert!(
        cells[3].ends_with("MB") || cells[3].ends_with("kB"),
        "{row}"
    );
    assert!(listed.starts_with("IMAGE"), "{listed}");

    // Objects the pods below need.
    let static_dir = server.data_dir().join("static-pv");
    std::fs::create_dir_all(&static_dir).expect("pv dir");
    std::fs::write(static_dir.join("hello.txt"), "from the host").expect("pv file");
    let dockercfg = |user: &str, password: &str| {
        let config = format!(
            r#"{{"auths":{{"{}":{{"auth":"{}"}}}}}}"#,
            registry.host(),
            basic(user, password)
        );
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(config)
    };
    for manifest in [
        format!(
            r#"{{"apiVersion":"v1","kind":"PersistentVolume","metadata":{{"name":"static-pv"}},
               "spec":{{"capacity":{{"storage":"1Gi"}},"accessModes":["ReadWriteOnce"],"storageClassName":"",
                 "hostPath":{{"path":"{}"}}}}}}"#,
            static_dir.display()
        ),
        r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"static"},
           "spec":{"accessModes":["ReadWriteOnce"],"storageClassName":"","volumeName":"static-pv",
             "resources":{"requests":{"storage":"1Gi"}}}}"#
            .to_string(),
        // Naming no class, as most charts' claims do: DefaultStorageClass
        // admission gives it the default `local-path`.
        r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"scratch"},
           "spec":{"accessModes":["ReadWriteOnce"],
             "resources":{"requests":{"storage":"64Mi"}}}}"#
            .to_string(),
        format!(
            r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"regcred"}},
               "type":"kubernetes.io/dockerconfigjson","data":{{".dockerconfigjson":"{}"}}}}"#,
            dockercfg("alice", "s3cret")
        ),
        format!(
            r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"puller-cred"}},
               "type":"kubernetes.io/dockerconfigjson","data":{{".dockerconfigjson":"{}"}}}}"#,
            dockercfg("bob", "hunter2")
        ),
        r#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"puller"},
           "imagePullSecrets":[{"name":"puller-cred"}]}"#
            .to_string(),
    ] {
        apply(server, &manifest);
    }

    let on_node = format!(r#""nodeName":"{NODE}","#);
    let sa_script = format!(
        "cat {SA_DIR}/token; echo; cat {SA_DIR}/namespace; echo; \
         grep -q 'BEGIN CERTIFICATE' {SA_DIR}/ca.crt && echo ca-ok; sleep 3600"
    );
    let private = format!("{}/private/app:v1", registry.host());
    let manifests = [
        shell_pod("token-reader", &sa_script, &on_node),
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"static-user"}},
               "spec":{{{on_node}"terminationGracePeriodSeconds":1,
                 "volumes":[{{"name":"data","persistentVolumeClaim":{{"claimName":"static"}}}}],
                 "containers":[{{"name":"main","image":"{IMAGE}","imagePullPolicy":"Never",
                   "command":["sh","-c","cat /data/hello.txt; echo; echo from-pod > /data/out.txt; sleep 3600"],
                   "volumeMounts":[{{"name":"data","mountPath":"/data"}}]}}]}}}}"#
        ),
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"no-claim"}},
               "spec":{{{on_node}"terminationGracePeriodSeconds":1,
                 "volumes":[{{"name":"data","persistentVolumeClaim":{{"claimName":"nope"}}}}],
                 "containers":[{{"name":"main","image":"{IMAGE}","imagePullPolicy":"Never",
                   "command":["sleep","3600"],"volumeMounts":[{{"name":"data","mountPath":"/data"}}]}}]}}}}"#
        ),
        // Scheduled (no nodeName): the scheduler selects the node for the
        // local-path claim, the agent provisions it.
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"local-user"}},
               "spec":{{"terminationGracePeriodSeconds":1,
                 "volumes":[{{"name":"data","persistentVolumeClaim":{{"claimName":"scratch"}}}}],
                 "containers":[{{"name":"main","image":"{IMAGE}","imagePullPolicy":"Never",
                   "command":["sh","-c","echo provisioned > /data/out.txt; sleep 3600"],
                   "volumeMounts":[{{"name":"data","mountPath":"/data"}}]}}]}}}}"#
        ),
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"private"}},
               "spec":{{{on_node}"imagePullSecrets":[{{"name":"regcred"}},{{"name":"gone"}}],
                 "containers":[{{"name":"main","image":"{private}"}}]}}}}"#
        ),
        // No pull secret: the mirror and its credentials come from
        // `registries.yaml`.
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"mirrored"}},
               "spec":{{{on_node}"containers":[{{"name":"main","image":"{MIRRORED}/team/app:v2"}}]}}}}"#
        ),
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"private-sa"}},
               "spec":{{{on_node}"serviceAccountName":"puller",
                 "containers":[{{"name":"main","image":"{private}"}}]}}}}"#
        ),
    ];
    for manifest in &manifests {
        apply(server, manifest);
    }

    // The token: mounted with the namespace and CA, usable from the host.
    let reader = eventually(Duration::from_secs(90), "token-reader Running", || {
        running(server, "token-reader")
    });
    let uid = reader["metadata"]["uid"].as_str().expect("uid").to_string();
    let log = eventually(Duration::from_secs(30), "token printed", || {
        let log = container_log(server, "token-reader", &uid);
        log.contains("ca-ok").then_some(log)
    });
    let mut lines = log.lines();
    let token = lines.next().expect("token line").trim().to_string();
    assert_eq!(token.split('.').count(), 3, "not a JWT: {log}");
    assert_eq!(lines.next(), Some("default"), "{log}");
    // The account holds nothing until it is bound to a role.
    let unbound = server.kubectl(&["--token", &token, "get", "pods"]);
    assert!(!unbound.status.success());
    assert!(
        String::from_utf8_lossy(&unbound.stderr).contains("Forbidden"),
        "{}",
        String::from_utf8_lossy(&unbound.stderr)
    );
    bind_account(
        server,
        "default-view",
        "--clusterrole=view",
        "default",
        "default",
    );
    // The mounted token authenticates.
    let as_pod = server.kubectl_ok(&["--token", &token, "get", "pods", "-o", "name"]);
    assert!(as_pod.contains("pod/token-reader"));
    let forged = format!("{token}x");
    let refused = server.kubectl(&["--token", &forged, "get", "pods"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"));

    // `kubectl create token`.
    let created = server.kubectl_ok(&["create", "token", "default", "--duration", "15m"]);
    let created = created.trim();
    assert_eq!(created.split('.').count(), 3, "{created}");
    server.kubectl_ok(&[
        "--token",
        created,
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods",
    ]);

    // PVCs: a static hostPath PV...
    let static_user = eventually(Duration::from_secs(60), "static-user Running", || {
        running(server, "static-user")
    });
    let static_uid = static_user["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    eventually(
        Duration::from_secs(30),
        "the pod wrote to its volume",
        || {
            (std::fs::read_to_string(static_dir.join("out.txt")).ok()? == "from-pod\n")
                .then_some(())
        },
    );
    let log = container_log(server, "static-user", &static_uid);
    assert!(log.starts_with("from the host"), "{log}");
    // ...a missing claim: ContainerCreating with a FailedMount event...
    eventually(Duration::from_secs(30), "no-claim FailedMount", || {
        events_of(server, "no-claim")
            .iter()
            .any(|(reason, message)| {
                reason == "FailedMount" && message.contains("\"nope\" not found")
            })
            .then_some(())
    });
    assert_eq!(
        waiting_reason(server, "no-claim").as_deref(),
        Some("ContainerCreating")
    );
    assert_eq!(pod(server, "no-claim")["status"]["phase"], "Pending");
    // ...and a local-path claim provisioned for the scheduled pod.
    eventually(Duration::from_secs(90), "local-user Running", || {
        running(server, "local-user")
    });
    let claim = json(&server.kubectl_ok(&["get", "pvc", "scratch", "-o", "json"]));
    assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    assert_eq!(claim["spec"]["storageClassName"], "local-path", "{claim}");
    let claim_uid = claim["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(claim["spec"]["volumeName"], format!("pvc-{claim_uid}"));
    let pv = json(&server.kubectl_ok(&["get", "pv", &format!("pvc-{claim_uid}"), "-o", "json"]));
    assert_eq!(pv["spec"]["storageClassName"], "local-path");
    assert_eq!(pv["spec"]["claimRef"]["name"], "scratch");
    let dir = server
        .data_dir()
        .join("storage")
        .join(format!("pvc-{claim_uid}_default_scratch"));
    eventually(
        Duration::from_secs(30),
        "the provisioned volume written",
        || (std::fs::read_to_string(dir.join("out.txt")).ok()? == "provisioned\n").then_some(()),
    );
    let classes = server.kubectl_ok(&["get", "storageclass", "local-path", "-o", "json"]);
    assert_contains(&classes, "WaitForFirstConsumer");
    claim_lifecycle(server, &format!("pvc-{claim_uid}"), &dir);

    // Pull secrets: the pod's, then its service account's, reach the registry.
    eventually(Duration::from_secs(60), "private: credentials sent", || {
        registry
            .saw(&format!("Basic {}", basic("alice", "s3cret")))
            .then_some(())
    });
    eventually(
        Duration::from_secs(60),
        "private-sa: credentials sent",
        || {
            registry
                .saw(&format!("Basic {}", basic("bob", "hunter2")))
                .then_some(())
        },
    );
    eventually(
        Duration::from_secs(60),
        "mirrored: the mirror's credentials sent",
        || {
            registry
                .saw(&format!("Basic {}", basic("carol", "mirror-pw")))
                .then_some(())
        },
    );
    eventually(Duration::from_secs(60), "private ImagePullBackOff", || {
        (waiting_reason(server, "private").as_deref() == Some("ImagePullBackOff")).then_some(())
    });
    // Its log, as a kubelet answers for a container whose image fails to
    // pull (the words follow the status, which a retry flips back to
    // ErrImagePull for a moment).
    let refused = server.kubectl_err(&["logs", "private"]);
    assert!(
        refused.contains("Error from server (BadRequest): container \"main\" in pod \"private\" is waiting to start: ")
            && (refused.contains("trying and failing to pull image")
                || refused.contains("image can't be pulled")),
        "{refused}"
    );
    let events = events_of(server, "private");
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "Failed" && m.contains(&private)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "FailedToRetrieveImagePullSecret" && m.contains("gone")),
        "{events:?}"
    );
    assert!(events.iter().any(|(r, _)| r == "BackOff"), "{events:?}");

    // A token bound to a deleted pod stops working.
    server.kubectl_ok(&[
        "delete",
        "pod",
        "token-reader",
        "--grace-period=1",
        "--wait=true",
    ]);
    let after = server.kubectl(&["--token", &token, "get", "pods"]);
    assert!(
        !after.status.success(),
        "a token bound to a deleted pod still authenticates"
    );
}
