//! containerd's configuration file (format version 2) and the CNI network that
//! skiff writes for it. Rendering is pure; `write_*` puts the files on disk
//! atomically so a running containerd (which watches the CNI directory) never
//! reads half a file.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use skiff_common::cidr::{self, Ipv4Net};
use skiff_common::quote::toml_string;

/// Where CNI plugin binaries live on Debian (`containernetworking-plugins`).
pub const DEFAULT_CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Unix socket paths longer than this do not fit `sockaddr_un.sun_path` (108
/// bytes); containerd also derives `<socket>.ttrpc`, hence the margin.
const MAX_SOCKET_PATH: usize = 100;

/// Linux interface names are at most 15 bytes (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// Errors while validating or writing containerd and CNI configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or directory could not be created or written.
    #[error("writing {path}: {source}")]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The socket path would not fit in a unix socket address.
    #[error("socket path {0} is too long for a unix socket (max {MAX_SOCKET_PATH} bytes)")]
    SocketPathTooLong(PathBuf),
    /// The pod CIDR is not an IPv4 network of the form `a.b.c.d/len`.
    #[error("invalid pod CIDR: {0}")]
    InvalidPodCidr(#[source] cidr::CidrError),
    /// The bridge name is not a valid Linux interface name.
    #[error("invalid bridge name {0:?}: 1 to 15 characters from [A-Za-z0-9_.-]")]
    InvalidBridgeName(String),
}

/// The `ContainerdPaths` methods naming the files at fixed places under the
/// base: each `name: "dir" / "file";` row (with its doc comment) is a
/// method joining those parts to the base, so the layout reads as one table.
macro_rules! files_under_base {
    ($($(#[$doc:meta])* $name:ident: $($part:literal)/+;)+) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> PathBuf {
                self.base$(.join($part))+
            }
        )+
    };
}

/// The files of one skiff-managed containerd, all under one base directory
/// (e.g. `DATA_DIR/agent/containerd`), so it never touches the host's own
/// containerd in `/var/lib/containerd` and `/run/containerd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdPaths {
    base: PathBuf,
}

impl ContainerdPaths {
    /// Lays the files out under `base`.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Self { base: base.into() }
    }

    /// The base directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    files_under_base! {
        /// containerd's `config.toml`.
        config_file: "config.toml";
        /// Per-registry `hosts.toml` files (mirrors, TLS), from `registries.yaml`.
        certs_dir: "certs.d";
        /// Persistent data (content store, snapshots, metadata).
        root: "root";
        /// Runtime state (task bundles, sockets of shims).
        state: "state";
        /// The gRPC socket (CRI and containerd's own API).
        socket: "containerd.sock";
        /// Where containerd looks for CNI network configuration.
        cni_conf_dir: "cni" / "net.d";
        /// host-local IPAM allocations, kept apart from the host's `/var/lib/cni`.
        cni_ipam_dir: "cni" / "ipam";
        /// containerd's combined stdout/stderr when skiff supervises it.
        log_file: "containerd.log";
        /// PID of the containerd skiff started, to clean up after a crash of skiff.
        pid_file: "containerd.pid";
        /// runc's state directory (instead of the shared `/run/containerd/runc`).
        runc_root: "runc";
        /// The `/opt` plugin directory containerd would otherwise put in `/opt/containerd`.
        opt_dir: "opt";
    }
}

/// containerd's configuration as skiff writes it.
#[derive(Debug, Clone)]
pub struct ContainerdConfig {
    /// Directory layout.
    pub paths: ContainerdPaths,
    /// The pod sandbox ("pause") image; it must already be in the `k8s.io`
    /// namespace because there is no registry to pull it from.
    pub sandbox_image: String,
    /// CNI plugin binaries.
    pub cni_bin_dir: PathBuf,
    /// containerd log level (`info`, `debug`, ...).
    pub log_level: String,
    /// Registry mirrors, credentials and TLS (`--private-registry`).
    pub registries: Option<super::registries::Registries>,
}

impl ContainerdConfig {
    /// A configuration with skiff's defaults under `paths`.
    pub fn new(paths: ContainerdPaths, sandbox_image: impl Into<String>) -> Self {
        Self {
            paths,
            sandbox_image: sandbox_image.into(),
            cni_bin_dir: PathBuf::from(DEFAULT_CNI_BIN_DIR),
            log_level: "info".to_string(),
            registries: None,
        }
    }

    /// Renders `config.toml`.
    ///
    /// Choices that matter on these machines: `restrict_oom_score_adj` (root
    /// here lacks CAP_SYS_RESOURCE, so the -998 score CRI asks for sandboxes
    /// makes runc fail), a streaming server on an ephemeral loopback port (the
    /// fixed default 10010 would clash between several containerds), and every
    /// path under the base directory, including network namespaces and
    /// runc's state, so two containerds (or a host one) never share state.
    pub fn render(&self) -> String {
        let p = &self.paths;
        let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
        let mut out = String::new();
        // Writing to a String cannot fail; the results are ignored on purpose.
        let _ = writeln!(out, "# Written by skiff; regenerated at every start.");
        let _ = writeln!(out, "version = 2");
        let _ = writeln!(out, "root = {}", toml_path(&p.root()));
        let _ = writeln!(out, "state = {}", toml_path(&p.state()));
        let _ = writeln!(out);
        let _ = writeln!(out, "[grpc]");
        let _ = writeln!(out, "  address = {}", toml_path(&p.socket()));
        let _ = writeln!(out);
        let _ = writeln!(out, "[debug]");
        let _ = writeln!(out, "  level = {}", toml_string(&self.log_level));
        let _ = writeln!(out);
        let _ = writeln!(out, "[plugins.\"io.containerd.internal.v1.opt\"]");
        let _ = writeln!(out, "  path = {}", toml_path(&p.opt_dir()));
        let _ = writeln!(out);
        let _ = writeln!(out, "[{cri}]");
        let _ = writeln!(
            out,
            "  sandbox_image = {}",
            toml_string(&self.sandbox_image)
        );
        let _ = writeln!(out, "  restrict_oom_score_adj = true");
        let _ = writeln!(out, "  stream_server_address = \"127.0.0.1\"");
        let _ = writeln!(out, "  stream_server_port = \"0\"");
        let _ = writeln!(out, "  enable_selinux = false");
        let _ = writeln!(out, "  netns_mounts_under_state_dir = true");
        let _ = writeln!(out);
        let _ = writeln!(out, "[{cri}.containerd]");
        let _ = writeln!(out, "  snapshotter = \"overlayfs\"");
        let _ = writeln!(out, "  default_runtime_name = \"runc\"");
        let _ = writeln!(out);
        let _ = writeln!(out, "[{cri}.containerd.runtimes.runc]");
        let _ = writeln!(out, "  runtime_type = \"io.containerd.runc.v2\"");
        let _ = writeln!(out);
        let _ = writeln!(out, "[{cri}.containerd.runtimes.runc.options]");
        let _ = writeln!(out, "  SystemdCgroup = false");
        let _ = writeln!(out, "  Root = {}", toml_path(&p.runc_root()));
        let _ = writeln!(out);
        let _ = writeln!(out, "[{cri}.cni]");
        let _ = writeln!(out, "  bin_dir = {}", toml_path(&self.cni_bin_dir));
        let _ = writeln!(out, "  conf_dir = {}", toml_path(&p.cni_conf_dir()));
        let _ = writeln!(out, "  max_conf_num = 1");
        if let Some(registries) = &self.registries {
            let _ = writeln!(out);
            let _ = writeln!(out, "[{cri}.registry]");
            let _ = writeln!(out, "  config_path = {}", toml_path(&p.certs_dir()));
            let _ = writeln!(out);
            out.push_str(&registries.auth_toml(cri));
        }
        out
    }

    /// Creates the directory layout and writes `config.toml`.
    pub fn write(&self) -> Result<PathBuf, ConfigError> {
        let p = &self.paths;
        let socket = p.socket();
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(ConfigError::SocketPathTooLong(socket));
        }
        for dir in [
            p.base().to_path_buf(),
            p.root(),
            p.state(),
            p.cni_conf_dir(),
            p.cni_ipam_dir(),
        ] {
            fs::create_dir_all(&dir).map_err(|source| ConfigError::Io { path: dir, source })?;
        }
        let certs = p.certs_dir();
        match &self.registries {
            Some(registries) => registries.write_hosts(&certs),
            None => match fs::remove_dir_all(&certs) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
        .map_err(|source| ConfigError::Io {
            path: certs,
            source,
        })?;
        // Owner-only: it may hold registry credentials.
        let path = p.config_file();
        skiff_common::files::write_private(&path, self.render().as_bytes()).map_err(|e| {
            ConfigError::Io {
                path: e.path,
                source: e.source,
            }
        })?;
        Ok(path)
    }
}

/// An IPv4 pod network such as `10.42.0.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCidr(Ipv4Net);

impl PodCidr {
    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.0.network()
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.0.prefix_len()
    }

    /// The first host address, which the bridge takes as the pods' gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.0.network()) + 1)
    }

    /// Whether `ip` lies inside this network.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.0.contains(&ip)
    }
}

impl FromStr for PodCidr {
    type Err = ConfigError;

    /// A network without host bits; a /31 or /32 leaves no address for a
    /// pod next to the gateway.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        cidr::parse_v4_network(s, 1..=30)
            .map(Self)
            .map_err(ConfigError::InvalidPodCidr)
    }
}

impl std::fmt::Display for PodCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The pod network skiff gives containerd: a Linux bridge with host-local
/// IPAM on the node's pod CIDR, masquerading traffic that leaves it, port
/// mappings for `hostPort`, and loopback.
#[derive(Debug, Clone)]
pub struct CniNetwork {
    /// CNI network name (also keys IPAM state and CNI's result cache).
    pub name: String,
    /// Name of the Linux bridge the pods attach to.
    pub bridge: String,
    /// The node's pod CIDR.
    pub pod_cidr: PodCidr,
    /// Where host-local keeps its allocations.
    pub ipam_data_dir: PathBuf,
    /// MTU of the pods' interfaces (none: the bridge plugin's default).
    pub mtu: Option<u32>,
    /// Whether the bridge plugin masquerades traffic leaving the pod CIDR.
    pub ip_masq: bool,
}

/// File name of skiff's network in the CNI conf dir. containerd loads only
/// the first file in lexical order (`max_conf_num = 1`), so it sorts early.
pub const CNI_CONFLIST_NAME: &str = "10-skiff.conflist";

impl CniNetwork {
    /// A network named `name` on `bridge`, with IPAM state under `paths`.
    pub fn new(
        name: impl Into<String>,
        bridge: impl Into<String>,
        pod_cidr: PodCidr,
        paths: &ContainerdPaths,
    ) -> Result<Self, ConfigError> {
        let bridge = bridge.into();
        let valid_name = !bridge.is_empty()
            && bridge.len() <= MAX_IFNAME
            && bridge
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !valid_name {
            return Err(ConfigError::InvalidBridgeName(bridge));
        }
        Ok(Self {
            name: name.into(),
            bridge,
            pod_cidr,
            ipam_data_dir: paths.cni_ipam_dir(),
            mtu: None,
            ip_masq: true,
        })
    }

    /// Renders the conflist JSON.
    pub fn render(&self) -> String {
        let mut conflist = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": self.ip_masq,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{
                            "subnet": self.pod_cidr.to_string(),
                            "gateway": self.pod_cidr.gateway().to_string(),
                        }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": self.ipam_data_dir,
                    }
                },
                {
                    "type": "portmap",
                    "capabilities": { "portMappings": true }
                },
                {
                    "type": "loopback"
                }
            ]
        });
        if let Some(mtu) = self.mtu {
            conflist["plugins"][0]["mtu"] = mtu.into();
        }
        // Serialising a `Value` built from strings and bools cannot fail.
        serde_json::to_string_pretty(&conflist).unwrap_or_default()
    }

    /// Writes the conflist into `conf_dir`, returning its path.
    pub fn write(&self, conf_dir: &Path) -> Result<PathBuf, ConfigError> {
        fs::create_dir_all(conf_dir).map_err(|source| ConfigError::Io {
            path: conf_dir.to_path_buf(),
            source,
        })?;
        fs::create_dir_all(&self.ipam_data_dir).map_err(|source| ConfigError::Io {
            path: self.ipam_data_dir.clone(),
            source,
        })?;
        let path = conf_dir.join(CNI_CONFLIST_NAME);
        write_atomically(&path, self.render().as_bytes())?;
        Ok(path)
    }
}

/// Writes via a temporary sibling and a rename, so readers see the old file
/// or the new one, never a partial one. The temporary name has no `.conf*`
/// extension, so CNI's directory scan ignores it.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), ConfigError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, contents).map_err(|source| ConfigError::Io {
        path: tmp.clone(),
        source,
    })?;
    fs::rename(&tmp, path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn toml_path(p: &Path) -> String {
    toml_string(&p.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ContainerdConfig {
        ContainerdConfig::new(
            ContainerdPaths::new("/var/lib/skiff/agent/containerd"),
            "skiff.local/pause:1",
        )
    }

    #[test]
    fn config_puts_every_path_under_the_base_directory() {
        let text = config().render();
        assert!(text.contains("version = 2\n"));
        assert!(text.contains("root = \"/var/lib/skiff/agent/containerd/root\"\n"));
        assert!(text.contains("state = \"/var/lib/skiff/agent/containerd/state\"\n"));
        assert!(
            text.contains(
                "[grpc]\n  address = \"/var/lib/skiff/agent/containerd/containerd.sock\""
            )
        );
        assert!(text.contains("path = \"/var/lib/skiff/agent/containerd/opt\""));
        assert!(text.contains("Root = \"/var/lib/skiff/agent/containerd/runc\""));
        assert!(text.contains("netns_mounts_under_state_dir = true"));
    }

    #[test]
    fn config_sets_the_cri_options_this_machine_needs() {
        let text = config().render();
        let cri = text
            .split("[plugins.\"io.containerd.grpc.v1.cri\"]\n")
            .nth(1)
            .expect("CRI section present");
        let cri = cri.split("\n[").next().unwrap_or_default();
        assert!(cri.contains("restrict_oom_score_adj = true"));
        assert!(cri.contains("sandbox_image = \"skiff.local/pause:1\""));
        assert!(cri.contains("stream_server_port = \"0\""));
        assert!(text.contains(
            "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/lib/cni\"\n  conf_dir = \"/var/lib/skiff/agent/containerd/cni/net.d\""
        ));
    }

    #[test]
    fn toml_strings_are_escaped() {
        let mut c = config();
        c.sandbox_image = "a\"b\\c\nd".to_string();
        assert!(c.render().contains("sandbox_image = \"a\\\"b\\\\c\\nd\""));
    }

    #[test]
    fn write_creates_the_layout_and_rejects_long_socket_paths() {
        let dir = tempfile::tempdir().unwrap();
        let c = ContainerdConfig::new(ContainerdPaths::new(dir.path().join("c")), "p:1");
        let path = c.write().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), c.render());
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "registry credentials stay private");
        }
        assert!(c.paths.root().is_dir());
        assert!(c.paths.cni_conf_dir().is_dir());

        let long = dir.path().join("x".repeat(120));
        let c = ContainerdConfig::new(ContainerdPaths::new(long), "p:1");
        assert!(matches!(c.write(), Err(ConfigError::SocketPathTooLong(_))));
    }

    #[test]
    fn pod_cidr_parses_and_rejects_bad_networks() {
        let cidr: PodCidr = "10.42.3.0/24".parse().unwrap();
        assert_eq!(cidr.network(), Ipv4Addr::new(10, 42, 3, 0));
        assert_eq!(cidr.prefix_len(), 24);
        assert_eq!(cidr.gateway(), Ipv4Addr::new(10, 42, 3, 1));
        assert!(cidr.contains(Ipv4Addr::new(10, 42, 3, 200)));
        assert!(!cidr.contains(Ipv4Addr::new(10, 42, 4, 1)));
        assert_eq!(cidr.to_string(), "10.42.3.0/24");
        for bad in [
            "10.42.3.0",
            "10.42.3.1/24",
            "10.42.3.0/31",
            "x/24",
            "10.42.3.0/y",
        ] {
            assert!(bad.parse::<PodCidr>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn conflist_chains_bridge_portmap_and_loopback_on_the_pod_cidr() {
        let paths = ContainerdPaths::new("/d");
        let net =
            CniNetwork::new("skiff", "skiff0", "10.42.0.0/24".parse().unwrap(), &paths).unwrap();
        let v: serde_json::Value = serde_json::from_str(&net.render()).unwrap();
        assert_eq!(v["name"], "skiff");
        let plugins = v["plugins"].as_array().unwrap();
        let types: Vec<_> = plugins
            .iter()
            .map(|p| p["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["bridge", "portmap", "loopback"]);
        assert_eq!(plugins[0]["bridge"], "skiff0");
        assert_eq!(plugins[0]["isGateway"], true);
        let ipam = &plugins[0]["ipam"];
        assert_eq!(ipam["type"], "host-local");
        assert_eq!(ipam["ranges"][0][0]["subnet"], "10.42.0.0/24");
        assert_eq!(ipam["ranges"][0][0]["gateway"], "10.42.0.1");
        assert_eq!(ipam["dataDir"], "/d/cni/ipam");
        assert_eq!(plugins[1]["capabilities"]["portMappings"], true);
    }

    #[test]
    fn the_pod_network_sets_the_pod_mtu_and_may_take_over_masquerading() {
        let paths = ContainerdPaths::new("/d");
        let mut net =
            CniNetwork::new("skiff", "skiff0", "10.42.0.0/24".parse().unwrap(), &paths).unwrap();
        let v: serde_json::Value = serde_json::from_str(&net.render()).unwrap();
        assert_eq!(v["plugins"][0]["ipMasq"], true);
        assert!(v["plugins"][0].get("mtu").is_none());
        net.mtu = Some(1450);
        net.ip_masq = false;
        let v: serde_json::Value = serde_json::from_str(&net.render()).unwrap();
        assert_eq!(v["plugins"][0]["mtu"], 1450);
        assert_eq!(v["plugins"][0]["ipMasq"], false);
    }

    #[test]
    fn bridge_names_must_be_valid_interface_names() {
        let paths = ContainerdPaths::new("/d");
        let cidr = "10.42.0.0/24".parse().unwrap();
        assert!(CniNetwork::new("n", "a-very-long-bridge-name", cidr, &paths).is_err());
        assert!(CniNetwork::new("n", "br 0", cidr, &paths).is_err());
        assert!(CniNetwork::new("n", "", cidr, &paths).is_err());
        assert!(CniNetwork::new("n", "skiff_br-1", cidr, &paths).is_ok());
    }

    #[test]
    fn conflist_write_is_atomic_and_named_to_load_first() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ContainerdPaths::new(dir.path());
        let net = CniNetwork::new("n", "br0", "10.42.0.0/24".parse().unwrap(), &paths).unwrap();
        let path = net.write(&paths.cni_conf_dir()).unwrap();
        assert_eq!(path.file_name().unwrap(), CNI_CONFLIST_NAME);
        assert_eq!(fs::read_to_string(&path).unwrap(), net.render());
        let names: Vec<_> = fs::read_dir(paths.cni_conf_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file left behind: {names:?}");
        assert!(paths.cni_ipam_dir().is_dir());
    }
}
