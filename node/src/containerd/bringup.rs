//! Bringing up the node's container runtime at agent start, in one call:
//! either skiff's own containerd (config and CNI network written under the
//! agent's data dir, supervised, the pause image built and imported) or an
//! existing CRI endpoint left alone; then, as k3s does, every image archive
//! in `AGENT_DIR/images/` is imported.

use std::path::PathBuf;
use std::time::Duration;

use super::config::{CniNetwork, ConfigError, ContainerdConfig, ContainerdPaths, PodCidr};
use super::supervisor::{ContainerdSupervisor, RuntimeEndpoint, SupervisorConfig, SupervisorError};
use crate::cri::CriRuntime;
use crate::images::{
    AirgapReport, ImageArchiveError, ImageImporter, ImportError, PAUSE_IMAGE, pause_image,
};

/// How to bring up the runtime.
#[derive(Debug, Clone)]
pub struct BringUpOptions {
    /// The agent's data dir (`DATA_DIR/agent`).
    pub agent_dir: PathBuf,
    /// `--container-runtime-endpoint`: use this runtime instead of starting
    /// containerd.
    pub external_endpoint: Option<String>,
    /// The `containerd` binary.
    pub containerd_bin: PathBuf,
    /// The `ctr` binary used for imports.
    pub ctr_bin: PathBuf,
    /// Static busybox, only needed for the pause image on architectures
    /// without skiff's built-in pause program.
    pub busybox: PathBuf,
    /// The pod network, when the pod CIDR is already known; otherwise set it
    /// later with `NodeRuntime::set_pod_network`.
    pub pod_network: Option<PodNetwork>,
    /// How long the runtime may take to answer CRI.
    pub ready_timeout: Duration,
    /// Registry mirrors, credentials and TLS for the containerd skiff
    /// starts (`--private-registry`).
    pub registries: Option<super::registries::Registries>,
}

/// The node's pod network: CNI network name, bridge, pod CIDR.
#[derive(Debug, Clone)]
pub struct PodNetwork {
    /// CNI network name.
    pub name: String,
    /// Linux bridge name.
    pub bridge: String,
    /// The node's pod CIDR (`spec.podCIDR`).
    pub cidr: PodCidr,
    /// MTU of the pods' interfaces (none: the bridge's default); the VXLAN
    /// overlay needs it 50 bytes below the link's.
    pub mtu: Option<u32>,
    /// Whether the bridge masquerades traffic leaving the pod CIDR (CNI's
    /// `ipMasq`); off when the agent's pod network masquerades instead,
    /// which keeps pod-to-pod traffic across nodes unmasqueraded.
    pub ip_masq: bool,
}

impl PodNetwork {
    /// skiff's defaults: network `skiff`, bridge `skiff0`.
    pub fn new(cidr: PodCidr) -> Self {
        Self {
            name: "skiff".to_string(),
            bridge: "skiff0".to_string(),
            cidr,
            mtu: None,
            ip_masq: true,
        }
    }
}

impl BringUpOptions {
    /// Supervised containerd from `PATH`, host busybox, 60 s to be ready.
    pub fn new(agent_dir: impl Into<PathBuf>) -> Self {
        Self {
            agent_dir: agent_dir.into(),
            external_endpoint: None,
            containerd_bin: PathBuf::from("containerd"),
            ctr_bin: PathBuf::from("ctr"),
            busybox: PathBuf::from(crate::images::builtin::HOST_BUSYBOX),
            pod_network: None,
            ready_timeout: Duration::from_secs(60),
            registries: None,
        }
    }

    /// Where skiff's containerd keeps its files.
    pub fn containerd_paths(&self) -> ContainerdPaths {
        ContainerdPaths::new(self.agent_dir.join("containerd"))
    }

    /// The airgap directory whose archives are imported at start.
    pub fn images_dir(&self) -> PathBuf {
        self.agent_dir.join("images")
    }
}

/// Failures while bringing up the runtime.
#[derive(Debug, thiserror::Error)]
pub enum BringUpError {
    /// Writing containerd's config or the CNI network failed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Building the pause image failed.
    #[error("building the pause image: {0}")]
    PauseImage(#[from] ImageArchiveError),
    /// Importing the pause image failed (pods could not start without it).
    #[error("importing the pause image: {0}")]
    ImportPause(#[source] ImportError),
    /// The airgap directory could not be read.
    #[error(transparent)]
    Airgap(ImportError),
    /// containerd did not start, or the endpoint did not answer.
    #[error(transparent)]
    Runtime(#[from] SupervisorError),
    /// The pod network is skiff's to write only when skiff runs containerd.
    #[error("the pod network of an external runtime ({0}) is not managed by skiff")]
    NotManaged(String),
}

/// The node's running container runtime.
#[derive(Debug)]
pub struct NodeRuntime {
    endpoint: RuntimeEndpoint,
    importer: ImageImporter,
    paths: Option<ContainerdPaths>,
    airgap: AirgapReport,
}

impl NodeRuntime {
    /// Brings the runtime up as described in the module docs.
    pub async fn start(options: BringUpOptions) -> Result<Self, BringUpError> {
        let (endpoint_handle, paths) = match &options.external_endpoint {
            Some(endpoint) => {
                let external = RuntimeEndpoint::external(endpoint, options.ready_timeout).await?;
                (external, None)
            }
            None => {
                let paths = options.containerd_paths();
                let mut containerd = ContainerdConfig::new(paths.clone(), PAUSE_IMAGE);
                containerd.registries = options.registries.clone();
                containerd.write()?;
                if let Some(network) = &options.pod_network {
                    write_network(&paths, network)?;
                }
                let mut config = SupervisorConfig::new(paths.clone());
                config.containerd_bin = options.containerd_bin.clone();
                config.ready_timeout = options.ready_timeout;
                let supervisor = ContainerdSupervisor::start(config).await?;
                (RuntimeEndpoint::Supervised(supervisor), Some(paths))
            }
        };
        let importer = ImageImporter::new(endpoint_handle.cri().socket())
            .with_ctr(options.ctr_bin.clone())
            .wait_visible_through(endpoint_handle.cri());
        let runtime = Self {
            endpoint: endpoint_handle,
            importer,
            paths,
            airgap: AirgapReport::default(),
        };
        // Any failure from here on must not leave containerd running.
        match runtime.import_images(&options).await {
            Ok(airgap) => Ok(Self { airgap, ..runtime }),
            Err(e) => {
                runtime.shutdown().await;
                Err(e)
            }
        }
    }

    async fn import_images(&self, options: &BringUpOptions) -> Result<AirgapReport, BringUpError> {
        if let Some(paths) = &self.paths {
            // Rebuilt at every start: deterministic, so re-importing an
            // unchanged image is a no-op for containerd.
            let archive = paths.base().join("pause.tar");
            pause_image(&options.busybox)?.write_docker_archive(&archive)?;
            self.importer
                .import(&archive)
                .await
                .map_err(BringUpError::ImportPause)?;
        }
        self.importer
            .import_dir(&options.images_dir())
            .await
            .map_err(BringUpError::Airgap)
    }

    /// Writes (or rewrites) the pod network; containerd picks it up without
    /// a restart. Only for skiff's own containerd.
    pub fn set_pod_network(&self, network: &PodNetwork) -> Result<PathBuf, BringUpError> {
        match &self.paths {
            Some(paths) => Ok(write_network(paths, network)?),
            None => Err(BringUpError::NotManaged(
                self.endpoint.cri().socket().display().to_string(),
            )),
        }
    }

    /// A CRI client for the runtime.
    pub fn cri(&self) -> CriRuntime {
        self.endpoint.cri()
    }

    /// The supervisor, when skiff runs containerd.
    pub fn supervisor(&self) -> Option<&ContainerdSupervisor> {
        match &self.endpoint {
            RuntimeEndpoint::Supervised(s) => Some(s),
            RuntimeEndpoint::External { .. } => None,
        }
    }

    /// Imports further archives (`skiff images import`).
    pub fn importer(&self) -> &ImageImporter {
        &self.importer
    }

    /// What the airgap import at start did.
    pub fn airgap_report(&self) -> &AirgapReport {
        &self.airgap
    }

    /// skiff's containerd files, when skiff runs containerd.
    pub fn containerd_paths(&self) -> Option<&ContainerdPaths> {
        self.paths.as_ref()
    }

    /// Stops containerd if skiff started it.
    pub async fn shutdown(self) {
        self.endpoint.shutdown().await;
    }
}

fn write_network(paths: &ContainerdPaths, network: &PodNetwork) -> Result<PathBuf, ConfigError> {
    let mut cni = CniNetwork::new(&network.name, &network.bridge, network.cidr, paths)?;
    cni.mtu = network.mtu;
    cni.ip_masq = network.ip_masq;
    cni.write(&paths.cni_conf_dir())
}

/// The socket of the runtime `options` describe (for clients such as
/// `skiff images list` that do not start it).
pub fn runtime_socket(options: &BringUpOptions) -> Result<PathBuf, crate::cri::CriError> {
    match &options.external_endpoint {
        Some(endpoint) => crate::cri::socket_path(endpoint),
        None => Ok(options.containerd_paths().socket()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn layout_under_the_agent_dir() {
        let o = BringUpOptions::new("/var/lib/skiff/agent");
        assert_eq!(o.images_dir(), Path::new("/var/lib/skiff/agent/images"));
        assert_eq!(
            o.containerd_paths().socket(),
            Path::new("/var/lib/skiff/agent/containerd/containerd.sock")
        );
        assert_eq!(
            runtime_socket(&o).unwrap(),
            Path::new("/var/lib/skiff/agent/containerd/containerd.sock")
        );
        let external = BringUpOptions {
            external_endpoint: Some("unix:///run/containerd/containerd.sock".into()),
            ..o
        };
        assert_eq!(
            runtime_socket(&external).unwrap(),
            Path::new("/run/containerd/containerd.sock")
        );
    }

    #[tokio::test]
    async fn a_failed_start_reports_the_runtime_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = BringUpOptions::new(dir.path());
        o.containerd_bin = dir.path().join("no-containerd");
        let err = NodeRuntime::start(o).await.unwrap_err();
        assert!(
            matches!(err, BringUpError::Runtime(SupervisorError::Spawn { .. })),
            "{err}"
        );
        // The config was written before the start was attempted.
        assert!(dir.path().join("containerd/config.toml").is_file());
    }
}
