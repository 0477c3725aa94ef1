//! Shakes out what an unmodified kubectl (/usr/bin/kubectl) needs, against
//! the router served over plain HTTP on a loopback port.

use std::path::PathBuf;
use std::process::Command;

use crate::harness::TestServer;

struct Kubectl {
    kubeconfig: PathBuf,
    _server: TestServer,
    _dir: tempfile::TempDir,
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    async fn start() -> Self {
        let server = TestServer::new().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = server.router.clone();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             contexts:\n- name: t\n  context:\n    cluster: t\n    user: u\ncurrent-context: t\nusers:\n- name: u\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, config).unwrap();
        Self {
            kubeconfig,
            _server: server,
            _dir: dir,
        }
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, None).await
    }

    async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("/usr/bin/kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--request-timeout=10s")
            .args(args);
        cmd.env("HOME", self._dir.path());
        let stdin = stdin.map(str::to_string);
        let out = tokio::task::spawn_blocking(move || {
            use std::io::Write;
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().expect("kubectl runs");
            if let Some(input) = stdin {
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
            }
            drop(child.stdin.take());
            child.wait_with_output().unwrap()
        })
        .await
        .unwrap();
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and asserts success; returns stdout.
    /// `ok` in namespace `demo`, where the workflow test works.
    async fn in_demo(&self, args: &[&str]) -> String {
        let args: Vec<&str> = ["-n", "demo"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        self.ok(&args).await
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.ok,
            "kubectl {args:?} failed:\n{}\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_everyday_commands() {
    let k = Kubectl::start().await;
    let version = k.ok(&["version", "-o", "json"]).await;
    assert!(version.contains("v1.33.0+skiff"), "{version}");

    let resources = k.ok(&["api-resources"]).await;
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("pods") && l.contains("po") && l.contains("Pod")),
        "{resources}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("deployments") && l.contains("apps/v1")),
        "{resources}"
    );
    let versions = k.ok(&["api-versions"]).await;
    assert!(
        versions.lines().any(|l| l == "apps/v1") && versions.lines().any(|l| l == "v1"),
        "{versions}"
    );

    // Generator commands send protobuf bodies.
    k.ok(&["create", "namespace", "demo"]).await;
    let namespaces = k.ok(&["get", "namespaces", "-o", "name"]).await;
    assert!(
        namespaces.contains("namespace/demo") && namespaces.contains("namespace/kube-system"),
        "{namespaces}"
    );

    k.in_demo(&["create", "configmap", "cfg", "--from-literal=k=v"])
        .await;
    k.in_demo(&[
        "create",
        "secret",
        "generic",
        "pw",
        "--from-literal=password=hunter2",
    ])
    .await;
    let secret = k
        .in_demo(&["get", "secret", "pw", "-o", "jsonpath={.data.password}"])
        .await;
    assert_eq!(secret, "aHVudGVyMg==");
    k.in_demo(&["create", "service", "clusterip", "svc", "--tcp=80:8080"])
        .await;
    let port = k
        .in_demo(&[
            "get",
            "svc",
            "svc",
            "-o",
            "jsonpath={.spec.ports[0].targetPort}",
        ])
        .await;
    assert_eq!(port, "8080");
    let node_port_svc = [
        "-n",
        "demo",
        "create",
        "service",
        "nodeport",
        "np",
        "--tcp=81:8081",
    ];
    k.ok(&node_port_svc).await;
    let node_port_path = "jsonpath={.spec.ports[0].nodePort}";
    let node_port = k.in_demo(&["get", "svc", "np", "-o", node_port_path]).await;
    assert!(
        node_port.parse::<u16>().is_ok_and(|p| p >= 30000),
        "{node_port}"
    );
    let json = k.in_demo(&["get", "configmap", "cfg", "-o", "json"]).await;
    let cm: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(cm["data"]["k"], "v");
    let yaml = k.in_demo(&["get", "cm", "cfg", "-o", "yaml"]).await;
    assert!(yaml.contains("k: v"), "{yaml}");
    let listed = k.in_demo(&["get", "cm"]).await;
    assert!(listed.contains("cfg"), "{listed}");

    k.in_demo(&["label", "cm", "cfg", "tier=gold"]).await;
    k.in_demo(&["annotate", "cm", "cfg", "note=hello"]).await;
    let selected = k
        .in_demo(&["get", "cm", "-l", "tier=gold", "-o", "name"])
        .await;
    assert_eq!(selected.trim(), "configmap/cfg");
    let none = k
        .in_demo(&["get", "cm", "-l", "tier=silver", "-o", "name"])
        .await;
    assert_eq!(none.trim(), "");

    k.in_demo(&[
        "patch",
        "cm",
        "cfg",
        "--type=merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ])
    .await;
    k.in_demo(&[
        "patch",
        "cm",
        "cfg",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ])
    .await;
    k.in_demo(&["patch", "cm", "cfg", "-p", r#"{"data":{"s":"3"}}"#])
        .await;
    let data = k
        .in_demo(&["get", "cm", "cfg", "-o", "jsonpath={.data}"])
        .await;
    for key in ["\"m\":\"1\"", "\"j\":\"2\"", "\"s\":\"3\""] {
        assert!(data.contains(key), "{data}");
    }

    k.in_demo(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=2",
    ])
    .await;
    let image_path = "jsonpath={.spec.template.spec.containers[0].image}";
    let image = k.in_demo(&["get", "deploy", "web", "-o", image_path]).await;
    assert_eq!(image, "busybox");
    k.in_demo(&["scale", "deployment", "web", "--replicas=3"])
        .await;
    let replicas = k
        .in_demo(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(replicas, "3");
    k.in_demo(&["get", "deploy", "-o", "wide"]).await;

    let missing = k.run(&["-n", "demo", "get", "cm", "nope"]).await;
    assert!(!missing.ok);
    assert!(
        missing
            .stderr
            .contains(r#"Error from server (NotFound): configmaps "nope" not found"#),
        "{}",
        missing.stderr
    );

    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: demo\ndata:\n  a: \"1\"\n";
    let out = k
        .run_with_stdin(&["apply", "--validate=false", "-f", "-"], Some(manifest))
        .await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    let changed = manifest.replace("a: \"1\"", "b: \"2\"");
    let out = k
        .run_with_stdin(&["apply", "--validate=false", "-f", "-"], Some(&changed))
        .await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    let data = k
        .in_demo(&["get", "cm", "applied", "-o", "jsonpath={.data}"])
        .await;
    assert_eq!(data, r#"{"b":"2"}"#, "apply removed the dropped key");

    let replaced = changed.replace("b: \"2\"", "c: \"3\"");
    let out = k
        .run_with_stdin(&["replace", "--validate=false", "-f", "-"], Some(&replaced))
        .await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);

    k.in_demo(&["delete", "cm", "cfg"]).await;
    let gone = k.run(&["-n", "demo", "get", "cm", "cfg"]).await;
    assert!(!gone.ok);

    let health = k.ok(&["get", "--raw", "/readyz"]).await;
    assert_eq!(health, "ok");
    // The checks by upstream's names, as scripts probe them one by one.
    let verbose = k.ok(&["get", "--raw", "/readyz?verbose"]).await;
    assert_eq!(
        verbose.lines().collect::<Vec<_>>(),
        [
            "[+]ping ok",
            "[+]etcd ok",
            "[+]etcd-readiness ok",
            "[+]shutdown ok",
            "readyz check passed"
        ],
        "{verbose}"
    );
    for check in ["/readyz/etcd", "/readyz/etcd-readiness", "/healthz/etcd"] {
        assert_eq!(k.ok(&["get", "--raw", check]).await, "ok", "{check}");
    }
    let apis = k.ok(&["get", "--raw", "/apis"]).await;
    assert!(apis.contains("APIGroupList"));

    // `get -w` prints the current objects, then live changes.
    let watching = k.run(&[
        "-n",
        "demo",
        "get",
        "cm",
        "-w",
        "--request-timeout=3s",
        "-o",
        "name",
    ]);
    let create_later = async {
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        k._server
            .configmap("demo", "live", serde_json::json!({}))
            .await;
    };
    let (watch, ()) = tokio::join!(watching, create_later);
    assert!(
        watch.stdout.contains("configmap/applied"),
        "{}{}",
        watch.stdout,
        watch.stderr
    );
    assert!(
        watch.stdout.contains("configmap/live"),
        "{}{}",
        watch.stdout,
        watch.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_expose_rc_reads_the_defaulted_selector() {
    let k = Kubectl::start().await;
    let rc = "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: web\nspec:\n  \
              template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      \
              containers:\n      - name: c\n        image: busybox\n        ports:\n        - containerPort: 80\n";
    let out = k.run_with_stdin(&["create", "-f", "-"], Some(rc)).await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    let out = k.run(&["expose", "rc", "web", "--port=80"]).await;
    assert!(out.ok, "{}{}", out.stdout, out.stderr);
    let selector = k
        .ok(&["get", "svc", "web", "-o", "jsonpath={.spec.selector}"])
        .await;
    assert_eq!(selector, r#"{"app":"web"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_then_server_side_apply_migrates_managed_fields() {
    let k = Kubectl::start().await;
    let cm = |v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\ndata:\n  k: \"{v}\"\n")
    };
    let out = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&cm("1")))
        .await;
    assert!(out.ok, "{}", out.stderr);
    let out = k
        .run_with_stdin(&["apply", "--server-side", "-f", "-"], Some(&cm("2")))
        .await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        !out.stderr.contains("managed fields migration"),
        "{}",
        out.stderr
    );
    let managers = k
        .ok(&[
            "get",
            "cm",
            "moved",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ])
        .await;
    assert!(
        !managers.contains("kubectl-client-side-apply"),
        "{managers}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_raw_shows_upstreams_key_order() {
    let k = Kubectl::start().await;
    k.ok(&["create", "configmap", "present", "--from-literal=a=b"])
        .await;
    let raw = k
        .ok(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps/present",
        ])
        .await;
    assert!(
        raw.starts_with(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"present","namespace":"default","uid":"#
        ),
        "{raw}"
    );
    // kubectl prints an error body only at high verbosity: the Status
    // bytes as the server wrote them, quoted in its log line.
    let out = k
        .run(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps/missing",
            "-v=8",
        ])
        .await;
    assert!(!out.ok);
    let want = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"missing\" not found","reason":"NotFound","details":{"name":"missing","kind":"configmaps"},"code":404}"#;
    let logged = want.replace('\\', "\\\\").replace('"', "\\\"");
    assert!(
        out.stderr.contains(&logged),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describes_a_service_whose_slice_names_no_port() {
    let k = Kubectl::start().await;
    let svc = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
        "spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}"#;
    let out = k.run_with_stdin(&["create", "-f", "-"], Some(svc)).await;
    assert!(out.ok, "{}", out.stderr);
    // A slice written by another controller, its port unnamed.
    let slice = r#"{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
        "metadata":{"name":"web-x","labels":{"kubernetes.io/service-name":"web"}},
        "addressType":"IPv4","endpoints":[{"addresses":["10.42.0.9"],"conditions":{"ready":true}}],
        "ports":[{"port":8080}]}"#;
    let out = k.run_with_stdin(&["create", "-f", "-"], Some(slice)).await;
    assert!(out.ok, "{}", out.stderr);
    let described = k.ok(&["describe", "svc", "web"]).await;
    assert!(
        described
            .lines()
            .any(|l| l.starts_with("Endpoints:") && l.contains("10.42.0.9:8080")),
        "{described}"
    );
}

/// `kubectl get <args>` as the words of each line, for comparing columns.
async fn table(k: &Kubectl, args: &[&str]) -> Vec<Vec<String>> {
    let args: Vec<&str> = ["get"].into_iter().chain(args.iter().copied()).collect();
    k.ok(&args)
        .await
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// `kubectl get` of the cluster-wide and RBAC kinds prints upstream's
/// columns, not just a name and an age.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_upstreams_columns_for_rbac_storage_and_policy_kinds() {
    let k = Kubectl::start().await;
    let objects = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"reader"},
        "rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]},
      {"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"readers"},
        "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},
        "subjects":[{"kind":"User","name":"bob"},{"kind":"Group","name":"devs"},
          {"kind":"ServiceAccount","name":"ci","namespace":"default"}]},
      {"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"fast",
        "annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},
        "provisioner":"example.com/fast","allowVolumeExpansion":true},
      {"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"high"},"value":1000},
      {"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"web-only"},
        "spec":{"podSelector":{"matchLabels":{"app":"web"}}}},
      {"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"name":"web-7d9",
        "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web",
          "uid":"0b7c4a52-6f3e-4a59-9f37-0f2b8e8c1d11","controller":true}]},"revision":2},
      {"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1"},
        "addressType":"IPv4","ports":[{"name":"http","port":80},{"name":"https","port":443}],
        "endpoints":[{"addresses":["10.42.0.1"]},{"addresses":["10.42.0.2"]},
          {"addresses":["10.42.0.3"]},{"addresses":["10.42.0.4"]}]}]}"#;
    create(&k, objects).await;
    let roles = table(&k, &["role", "reader"]).await;
    assert_eq!(roles[0], ["NAME", "CREATED", "AT"]);
    assert!(roles[1][1].ends_with('Z'), "{roles:?}");
    let bindings = table(&k, &["rolebinding", "readers", "-o", "wide"]).await;
    assert_eq!(
        bindings[0],
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    assert_eq!(bindings[1][..2], ["readers", "Role/reader"]);
    assert_eq!(bindings[1][3..], ["bob", "devs", "default:ci"]);
    let admin = table(&k, &["clusterrolebinding", "cluster-admin"]).await;
    assert_eq!(
        admin[1][..2],
        ["cluster-admin", "ClusterRole/cluster-admin"]
    );
    let classes = table(&k, &["storageclass", "fast"]).await;
    assert_eq!(
        classes[0],
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ]
    );
    assert_eq!(
        classes[1][..6],
        [
            "fast",
            "(default)",
            "example.com/fast",
            "Delete",
            "Immediate",
            "true"
        ]
    );
    let priorities = table(&k, &["priorityclass", "high"]).await;
    assert_eq!(
        priorities[0],
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    );
    assert_eq!(priorities[1][..3], ["high", "1000", "false"]);
    assert_eq!(priorities[1][4], "PreemptLowerPriority");
    let policies = table(&k, &["networkpolicy", "web-only"]).await;
    assert_eq!(policies[0], ["NAME", "POD-SELECTOR", "AGE"]);
    assert_eq!(policies[1][..2], ["web-only", "app=web"]);
    let revisions = table(&k, &["controllerrevision", "web-7d9"]).await;
    assert_eq!(revisions[0], ["NAME", "CONTROLLER", "REVISION", "AGE"]);
    assert_eq!(revisions[1][..3], ["web-7d9", "statefulset.apps/web", "2"]);
    let slices = table(&k, &["endpointslice", "web-1"]).await;
    assert_eq!(
        slices[0],
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    );
    assert_eq!(
        slices[1][..7],
        [
            "web-1",
            "IPv4",
            "80,443",
            "10.42.0.1,10.42.0.2,10.42.0.3",
            "+",
            "1",
            "more..."
        ]
    );
}

/// Creates the items of a `List` with `kubectl create -f -`.
async fn create(k: &Kubectl, objects: &str) {
    let out = k
        .run_with_stdin(&["create", "-f", "-"], Some(objects))
        .await;
    assert!(out.ok, "{}", out.stderr);
}

/// `kubectl get` of the CSI kinds prints upstream's columns, not just a
/// name and an age (and CSIStorageCapacities, as upstream, no age at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_upstreams_columns_for_csi_kinds() {
    let k = Kubectl::start().await;
    let objects = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"csi.example.com"},
        "spec":{"attachRequired":false,"podInfoOnMount":true,"tokenRequests":[{"audience":"vault"}],
          "volumeLifecycleModes":["Persistent","Ephemeral"]}},
      {"apiVersion":"storage.k8s.io/v1","kind":"CSINode","metadata":{"name":"node-a"},
        "spec":{"drivers":[{"name":"csi.example.com","nodeID":"node-a"}]}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"va-1"},
        "spec":{"attacher":"csi.example.com","nodeName":"node-a","source":{"persistentVolumeName":"pv-1"}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"CSIStorageCapacity","metadata":{"name":"cap-1"},
        "storageClassName":"fast","capacity":"1024Mi"}]}"#;
    create(&k, objects).await;
    let drivers = table(&k, &["csidriver", "csi.example.com"]).await;
    assert_eq!(
        drivers[0],
        [
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES",
            "AGE"
        ]
    );
    assert_eq!(
        drivers[1][..7],
        [
            "csi.example.com",
            "false",
            "true",
            "false",
            "vault",
            "false",
            "Persistent,Ephemeral"
        ]
    );
    let nodes = table(&k, &["csinode", "node-a"]).await;
    assert_eq!(nodes[0], ["NAME", "DRIVERS", "AGE"]);
    assert_eq!(nodes[1][..2], ["node-a", "1"]);
    let attachments = table(&k, &["volumeattachment", "va-1"]).await;
    assert_eq!(
        attachments[0],
        ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    );
    assert_eq!(
        attachments[1][..5],
        ["va-1", "csi.example.com", "pv-1", "node-a", "false"]
    );
    let capacities = table(&k, &["csistoragecapacity", "cap-1"]).await;
    assert_eq!(capacities[0], ["NAME", "STORAGECLASSNAME", "CAPACITY"]);
    assert_eq!(capacities[1], ["cap-1", "fast", "1Gi"]);
}

/// `kubectl get` of ServiceCIDRs prints their ranges and of IPAddresses
/// their parent (and, as upstream, no age).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_upstreams_columns_for_service_cidrs_and_ip_addresses() {
    let k = Kubectl::start().await;
    let objects = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR","metadata":{"name":"extra"},
        "spec":{"cidrs":["10.100.0.0/16","fd00:10:100::/64"]}},
      {"apiVersion":"networking.k8s.io/v1","kind":"IPAddress","metadata":{"name":"10.100.0.7"},
        "spec":{"parentRef":{"group":"","resource":"services","namespace":"default","name":"web"}}}]}"#;
    create(&k, objects).await;
    let cidrs = table(&k, &["servicecidr", "extra"]).await;
    assert_eq!(cidrs[0], ["NAME", "CIDRS", "AGE"]);
    assert_eq!(cidrs[1][..2], ["extra", "10.100.0.0/16,fd00:10:100::/64"]);
    let addresses = table(&k, &["ipaddress", "10.100.0.7"]).await;
    assert_eq!(addresses[0], ["NAME", "PARENTREF"]);
    assert_eq!(addresses[1], ["10.100.0.7", "services/default/web"]);
}

/// `kubectl get podtemplates` prints the template's containers, images and
/// pod labels (and, as upstream, no age).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_upstreams_columns_for_pod_templates() {
    let k = Kubectl::start().await;
    let template = r#"{"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"web-template"},
      "template":{"metadata":{"labels":{"tier":"front","app":"web"}},
        "spec":{"containers":[{"name":"web","image":"nginx:1.27"},{"name":"log","image":"busybox"}]}}}"#;
    create(&k, template).await;
    let templates = table(&k, &["podtemplate", "web-template"]).await;
    assert_eq!(
        templates[0],
        ["NAME", "CONTAINERS", "IMAGES", "POD", "LABELS"]
    );
    assert_eq!(
        templates[1],
        [
            "web-template",
            "web,log",
            "nginx:1.27,busybox",
            "app=web,tier=front"
        ]
    );
}

/// `kubectl get events.events.k8s.io` prints the columns core events do,
/// read from the v1 fields (`regarding`, `note`, the reporting controller
/// and instance as the source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_core_event_columns_for_events_k8s_io_events() {
    let k = Kubectl::start().await;
    let event = r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"pulled-1"},
      "eventTime":"2026-01-01T00:00:00.000000Z","type":"Normal","reason":"Pulled","action":"Pull",
      "regarding":{"kind":"Pod","name":"web-1","namespace":"default","fieldPath":"spec.containers{web}"},
      "note":"Pulled","reportingController":"kubelet","reportingInstance":"node-a"}"#;
    create(&k, event).await;
    let events = table(&k, &["events.events.k8s.io", "pulled-1"]).await;
    assert_eq!(
        events[0],
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert_eq!(events[1][1..], ["Normal", "Pulled", "pod/web-1", "Pulled"]);
    let wide = table(&k, &["events.events.k8s.io", "pulled-1", "-o", "wide"]).await;
    assert_eq!(
        wide[0],
        [
            "LAST",
            "SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST",
            "SEEN",
            "COUNT",
            "NAME"
        ]
    );
    assert_eq!(
        wide[1][1..8],
        [
            "Normal",
            "Pulled",
            "pod/web-1",
            "spec.containers{web}",
            "kubelet,",
            "node-a",
            "Pulled"
        ]
    );
    assert_eq!(wide[1][9..], ["1", "pulled-1"]);
}
