//! One API server plus one agent (with its own containerd, pod CIDR and
//! bridge) per test, torn down completely afterwards.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition, Pod, PodCondition};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use skiff_apiserver::tls::ClusterCerts;
pub use skiff_common::node_conditions::ready_condition;
use skiff_informer::SharedInformerFactory;
use skiff_node::agent::NodeServerTls;
use skiff_node::agent::identity::serving_cert::{LocalSigner, ServingCertRequest};
use skiff_node::agent::pod::backoff::BackoffConfig;
use skiff_node::agent::pod::sysctls::Allowlist;
use skiff_node::agent::{self, AgentConfig};
use skiff_node::images::{self, BUSYBOX_IMAGE};
use skiff_node::{CriRuntime, CriTimeouts, Runtime};
use skiff_testkit::UserInfo;
use tokio::sync::watch;

use skiff_testkit::host::cleanup_host;

pub struct TestCluster {
    /// The cluster CA and the API server's client certificate for nodes.
    pub certs: ClusterCerts,
    /// The API server and its store (skiff-testkit), in a directory the
    /// agent keeps its state in too.
    pub api: skiff_testkit::TestCluster,
    pub client: kube::Client,
    pub config: AgentConfig,
    pub cri: CriRuntime,
    agent: Option<RunningAgent>,
}

struct RunningAgent {
    stop: watch::Sender<bool>,
    factory: SharedInformerFactory,
    task: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
}

pub fn assert_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the agent tests run containerd and need root");
}

impl TestCluster {
    /// API server, then an agent named `node-<slot>` on a pod network of its own.
    /// Each test takes a slot no other test of the binary uses: the slot
    /// names the bridge, pod CIDR and cgroup root its clean-up removes.
    pub async fn start(slot: u8) -> Self {
        Self::start_with(slot, |_| {}).await
    }

    /// [`Self::start`] with the agent's configuration changed by `configure`
    /// after the tests' own settings.
    pub async fn start_with(slot: u8, configure: impl FnOnce(&mut AgentConfig)) -> Self {
        assert_root();
        let dir = tempfile::Builder::new()
            .prefix("skiff-agt-")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".to_string()])
            .expect("cluster certificates");
        let kubelet_client = Arc::new(certs.kubelet_client().expect("kubelet client"));
        let api = skiff_testkit::TestCluster::builder()
            .in_dir(dir)
            .config(|c| c.kubelet_client = Some(kubelet_client))
            .user(UserInfo::new(
                "system:node:test",
                ["system:masters".to_string()],
            ))
            .start()
            .await;
        let client = api.client.clone();
        let pid = std::process::id();
        let mut config = AgentConfig::new(format!("node-{slot}"), api.dir().join("agent"));
        config.fallback_pod_cidr = format!("10.232.{}.0/24", (pid % 30) * 8 + u32::from(slot));
        config.cni_bridge = format!("ska{}s{}", pid % 100_000, slot);
        config.cni_network = format!("skiff-agent-test-{}", config.cni_bridge);
        // Pod cgroups of its own: concurrent tests' agents would otherwise
        // weigh one shared `kubepods`, and removing a test's leaves no trace.
        config.cgroup_root = Some(format!("/{}", config.cni_bridge));
        // Agents of concurrent tests share the host's network namespace: no
        // VXLAN device (one name and port for all), a masquerade table each.
        config.overlay.backend = skiff_node::agent::overlay::Backend::None;
        config.overlay.table = config.cni_network.clone();
        config.pod_cidr_wait = Duration::from_millis(200);
        config.heartbeat_interval = Duration::from_secs(2);
        config.server_port = 0;
        config.server_tls = Some(node_tls(&certs));
        // One sysctl beyond the safe set, as `--allowed-unsafe-sysctls` allows.
        config.sysctls =
            Allowlist::with_unsafe(&["net.core.somaxconn".into()]).expect("namespaced");
        // The tests share the build machine's disk: keep how full it is out
        // of the conditions and events they assert on.
        config.eviction_hard = "nodefs.available<0%".parse().expect("threshold");
        // Nor may it remove the images later cases need (there is no
        // registry to pull them again from).
        config.image_gc.high_threshold_percent = 100;
        config.crash_backoff = BackoffConfig {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(4),
            reset_after: Duration::from_secs(600),
        };
        configure(&mut config);
        let airgap = config.runtime.images_dir();
        std::fs::create_dir_all(&airgap).expect("airgap dir");
        images::write_host_busybox(&airgap.join("busybox.tar")).expect("busybox archive");
        let socket = config.runtime.containerd_paths().socket();
        let cri = CriRuntime::new(&socket.to_string_lossy(), CriTimeouts::default()).expect("cri");
        let mut cluster = Self {
            certs,
            api,
            client,
            config,
            cri,
            agent: None,
        };
        cluster.start_agent().await;
        cluster
    }

    /// Starts the agent and waits until its Node is Ready.
    pub async fn start_agent(&mut self) {
        let (stop, stop_rx) = watch::channel(false);
        let factory = SharedInformerFactory::new(self.client.clone());
        let task = {
            let client = self.client.clone();
            let factory = factory.clone();
            let config = self.config.clone();
            tokio::spawn(async move { agent::run(client, &factory, config, stop_rx).await })
        };
        self.agent = Some(RunningAgent {
            stop,
            factory,
            task,
        });
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = self.config.node_name.clone();
        let agent = self.agent.as_ref().expect("agent");
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            assert!(
                !agent.task.is_finished(),
                "agent stopped early:\n{}",
                self.containerd_log()
            );
            let ready = nodes
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .is_some_and(|n| ready_condition(&n).is_some_and(|c| c.status == "True"));
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node never Ready:\n{}",
                self.containerd_log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the agent (and its containerd); pods keep running.
    pub async fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            let _ = agent.stop.send(true);
            agent.factory.shutdown();
            let result = tokio::time::timeout(Duration::from_secs(60), agent.task)
                .await
                .expect("agent stops in time")
                .expect("agent task");
            result.expect("agent ran without error");
        }
    }

    /// Restarts the agent with its configuration changed by `configure`
    /// (its pods keep running through the restart).
    pub async fn restart_agent_with(&mut self, configure: impl FnOnce(&mut AgentConfig)) {
        self.stop_agent().await;
        configure(&mut self.config);
        self.start_agent().await;
    }

    pub fn containerd_log(&self) -> String {
        let path = self.config.runtime.containerd_paths().log_file();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Creates a pod bound to this node from a JSON manifest.
    pub async fn create_pod(&self, mut manifest: serde_json::Value) -> Pod {
        manifest["spec"]["nodeName"] = serde_json::json!(self.config.node_name);
        let pod: Pod = serde_json::from_value(manifest).expect("pod manifest");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod")
    }

    /// Creates a ConfigMap in the pods' namespace from a JSON manifest: what
    /// their volumes and environment read.
    pub async fn create_configmap(&self, manifest: serde_json::Value) -> ConfigMap {
        let configmap: ConfigMap = serde_json::from_value(manifest).expect("configmap manifest");
        Api::namespaced(self.client.clone(), "default")
            .create(&PostParams::default(), &configmap)
            .await
            .expect("create configmap")
    }

    /// Creates a pod as [`Self::create_pod`] does and waits until it is
    /// Running: the set-up of every case that acts on a running pod.
    pub async fn run_pod(&self, manifest: serde_json::Value, timeout: Duration) -> Pod {
        let created = self.create_pod(manifest).await;
        let name = created.metadata.name.expect("pod name");
        self.wait_phase(&name, timeout, "Running").await
    }

    /// Polls the pod until `check` holds.
    pub async fn wait_pod(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        check: impl Fn(&Pod) -> bool,
    ) -> Pod {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            if let Ok(Some(pod)) = self.pods().get_opt(name).await {
                if check(&pod) {
                    return pod;
                }
                last = Some(pod);
            }
            assert!(
                Instant::now() < deadline,
                "pod {name}: timed out waiting for {what}; last status: {}",
                serde_json::to_string_pretty(&last.and_then(|p| p.status)).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls the pod until its phase is `phase`.
    pub async fn wait_phase(&self, name: &str, timeout: Duration, phase: &str) -> Pod {
        self.wait_pod(name, timeout, phase, |p| crate::harness::phase(p) == phase)
            .await
    }

    /// Waits until the node has deleted pod `name` with grace 0 (its final
    /// delete), which a finalizer of the test's own outlives; the pod as the
    /// node left it.
    pub async fn wait_final_delete(&self, name: &str, timeout: Duration) -> Pod {
        self.wait_pod(name, timeout, "the node's final delete", |p| {
            p.metadata.deletion_grace_period_seconds == Some(0)
        })
        .await
    }

    /// Deletes the pod with its own grace period; a failed request fails the test.
    pub async fn delete_pod(&self, name: &str) {
        self.pods()
            .delete(name, &kube::api::DeleteParams::default())
            .await
            .expect("delete");
    }

    /// Waits until the pod object is gone.
    pub async fn wait_gone(&self, name: &str, timeout: Duration) -> Duration {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.pods().get_opt(name).await.expect("get pod").is_none() {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("pod {name} not deleted within {timeout:?}");
    }

    /// Every sandbox the runtime holds, whatever its state: what the cases
    /// check is left behind.
    pub async fn sandboxes(&self) -> Vec<skiff_node::cri_api::PodSandbox> {
        Runtime::list_pod_sandboxes(&self.cri, None)
            .await
            .expect("list sandboxes")
    }

    pub fn log_root(&self) -> PathBuf {
        self.config.log_root()
    }

    /// Where the agent finds `Localhost` seccomp profiles.
    pub fn seccomp_root(&self) -> PathBuf {
        skiff_node::agent::pod::seccomp_root(self.config.agent_dir())
    }

    /// Removes every pod's containers, stops the agent and containerd, and
    /// deletes the bridge.
    pub async fn teardown(mut self) {
        if let Ok(sandboxes) = self.cri.list_pod_sandboxes(None).await {
            for s in sandboxes {
                let _ = self.cri.stop_pod_sandbox(&s.id).await;
                let _ = self.cri.remove_pod_sandbox(&s.id).await;
            }
        }
        self.stop_agent().await;
        self.api.shutdown();
        cleanup_host(self.api.dir(), &self.config.cni_bridge);
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(agent) = self.agent.take() {
            let _ = agent.stop.send(true);
            agent.task.abort();
            cleanup_host(self.api.dir(), &self.config.cni_bridge);
        }
        skiff_testkit::host::delete_nft_table("ip", &self.config.overlay.table);
        if let Some(root) = &self.config.cgroup_root {
            skiff_testkit::host::remove_cgroup_tree(root);
        }
    }
}

/// The node server's TLS, its serving certificate signed by the test
/// cluster's CA as `skiff server` signs its own node's.
fn node_tls(certs: &ClusterCerts) -> NodeServerTls {
    let ca_cert = certs.ca_cert_pem.clone();
    let ca_key = certs.ca_key_pem.clone();
    let sign = move |request: &ServingCertRequest| {
        let key = rcgen::KeyPair::from_pem(&ca_key).map_err(|e| e.to_string())?;
        let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert, key).map_err(|e| e.to_string())?;
        let mut csr = rcgen::CertificateSigningRequestParams::from_pem(&request.csr_pem)
            .map_err(|e| e.to_string())?;
        csr.params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        csr.params.use_authority_key_identifier_extension = true;
        Ok(csr.signed_by(&issuer).map_err(|e| e.to_string())?.pem())
    };
    NodeServerTls {
        ca_pem: certs.ca_cert_pem.clone(),
        signer: Arc::new(LocalSigner(sign)),
    }
}

/// Removes the finalizers of pod `name`: a test's own, which kept the
/// object after the node's final delete so that its last status could be
/// read.
pub async fn release(pods: &Api<Pod>, name: &str) {
    let unheld = serde_json::json!({"metadata": {"finalizers": null}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(unheld))
        .await
        .expect("finalizer removed");
}

/// The runtime id of a container from its status.
pub fn container_id(pod: &Pod, name: &str) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .and_then(|c| c.container_id.clone())
        .and_then(|id| id.strip_prefix("containerd://").map(str::to_string))
        .expect("container id in status")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The status of the pod's condition `kind`.
pub fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod_condition(pod, kind).map(|c| c.status.clone())
}

/// The pod's condition `kind`.
pub fn pod_condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// The node's condition `kind`.
pub fn node_condition<'a>(node: &'a Node, kind: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// A pod of one busybox container, `container`, that sleeps for an hour:
/// the cases' plain running pod.
pub fn sleeper(name: &str, container: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": container, "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
    })
}

/// Burstable's memory request in [`create_qos_pods`].
pub const BURSTABLE_MEMORY_REQUEST: u64 = 256 << 20;

/// Three sleeping pods of one container `c`, one per QoS class:
/// `guaranteed` (100m CPU and 64 MiB, requested and limited), `burstable`
/// (requests 200m CPU and [`BURSTABLE_MEMORY_REQUEST`], no limits) and
/// `best-effort`.
pub async fn create_qos_pods(cluster: &TestCluster) {
    let exact = serde_json::json!({"cpu": "100m", "memory": "64Mi"});
    let pods = [
        (
            "guaranteed",
            serde_json::json!({"requests": exact, "limits": exact}),
        ),
        (
            "burstable",
            serde_json::json!({"requests": {"cpu": "200m", "memory": "256Mi"}}),
        ),
        ("best-effort", serde_json::json!({})),
    ];
    for (name, resources) in pods {
        let mut pod = sleeper(name, "c");
        pod["spec"]["terminationGracePeriodSeconds"] = 0.into();
        pod["spec"]["containers"][0]["resources"] = resources;
        cluster.create_pod(pod).await;
    }
}

/// The status of init container `name` (a sidecar's among them).
pub fn init_container_status<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// The core/v1 Events in every namespace matching the field `selector`.
pub async fn events(
    cluster: &TestCluster,
    selector: &str,
) -> Vec<k8s_openapi::api::core::v1::Event> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(cluster.client.clone());
    let params = kube::api::ListParams::default().fields(selector);
    api.list(&params).await.expect("events listed").items
}

pub fn container_status<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// What container `name` left on terminating: its termination message, or
/// its log's end under `FallbackToLogsOnError`.
pub fn termination_message(pod: &Pod, name: &str) -> Option<String> {
    container_status(pod, name)?
        .state
        .as_ref()?
        .terminated
        .as_ref()?
        .message
        .clone()
}

/// Asserts that `state` (a container's state or last state) is terminated with
/// `exit_code` and `reason`; `what` names the state when it is not terminated.
#[track_caller]
pub fn assert_terminated(
    state: Option<&k8s_openapi::api::core::v1::ContainerState>,
    what: &str,
    exit_code: i32,
    reason: &str,
) {
    let terminated = state.and_then(|s| s.terminated.as_ref()).expect(what);
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (exit_code, Some(reason))
    );
}

pub async fn exec(cri: &CriRuntime, id: &str, cmd: &[&str]) -> (i32, String) {
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    let out = Runtime::exec_sync(cri, id, &cmd, Duration::from_secs(20))
        .await
        .expect("exec");
    (
        out.exit_code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
