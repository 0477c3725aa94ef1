//! The `skiff` binary: command-line parsing, configuration and wiring of the
//! components into one process. It owns process supervision and start-up
//! reporting; it must never hold cluster logic of its own.

mod admin_client;
mod agent;
mod allocator;
mod bootstrap;
mod certificate;
mod check_config;
mod code_pages;
mod columns;
mod component_args;
mod config_file;
mod data_dir;
mod images;
mod ingress;
mod secrets_encrypt;
mod server;
mod snapshot;
mod token;

use std::io::IsTerminal;

use clap::{Parser, Subcommand};
use tokio::runtime::Builder;

/// skiff: a Kubernetes distribution in one binary.
#[derive(Debug, Parser)]
#[command(name = "skiff", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a cluster: API server, controllers, scheduler and node agent.
    // Boxed: these two have many more flags than the other commands.
    Server(Box<server::ServerArgs>),
    /// Run only the node agent, joining a skiff server.
    Agent(Box<agent::AgentArgs>),
    /// Import and list container images of a running node.
    Images(images::ImagesArgs),
    /// Show and rotate the keys that encrypt Secrets at rest (talks to the
    /// running server).
    SecretsEncrypt(secrets_encrypt::SecretsEncryptArgs),
    /// Save, list, delete and prune snapshots of the cluster's store (on
    /// the running server), or restore one into a data dir.
    Snapshot(snapshot::SnapshotArgs),
    /// Create, list and delete bootstrap tokens agents join with (on the
    /// running server), as `kubeadm token`.
    Token(token::TokenArgs),
    /// Rotate the server's certificates (in the data dir; restart after).
    Certificate(certificate::CertificateArgs),
    /// Check that this host can run `skiff server`: kernel features,
    /// binaries and free ports, one pass/fail line each (exit 1 when a
    /// required one fails).
    CheckConfig(check_config::CheckConfigArgs),
    /// Print the skiff version.
    Version,
}

fn main() -> anyhow::Result<()> {
    let (args, config_file) = config_file::with_file_flags(
        std::env::args_os().collect(),
        |name| std::env::var(name).ok(),
        is_switch,
    )?;
    let args = match component_args::translate(args, flag_kind) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("error: {error}");
            if let Some(path) = &config_file {
                eprintln!("(flags were also read from {})", path.display());
            }
            std::process::exit(2);
        }
    };
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            if let Some(path) = &config_file {
                eprintln!("(flags were also read from {})", path.display());
            }
            std::process::exit(error.exit_code());
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SKIFF_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: a journal, a log
        // file or a pipe gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match cli.command {
        Command::Server(args) => block_on(Builder::new_multi_thread(), server::run(*args)),
        Command::Agent(args) => block_on(Builder::new_multi_thread(), agent::run(*args)),
        Command::Images(args) => block_on(Builder::new_current_thread(), images::run(args)),
        Command::SecretsEncrypt(args) => {
            block_on(Builder::new_current_thread(), secrets_encrypt::run(args))
        }
        Command::Snapshot(args) => block_on(Builder::new_current_thread(), snapshot::run(args)),
        Command::Token(args) => block_on(Builder::new_current_thread(), token::run(args)),
        Command::Certificate(args) => certificate::run(args),
        Command::CheckConfig(args) => check_config::run(args),
        Command::Version => {
            println!("skiff {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    }
}

/// Whether `skiff <command> --<flag>` is a switch: it takes no value.
fn is_switch(command: &str, flag: &str) -> bool {
    find_flag(command, flag).is_some_and(|arg| !arg.get_action().takes_values())
}

/// Whether `skiff <command>` has the long flag `--<flag>`, and whether it
/// may be repeated.
fn flag_kind(command: &str, flag: &str) -> Option<component_args::FlagKind> {
    Some(match find_flag(command, flag)?.get_action() {
        clap::ArgAction::Append => component_args::FlagKind::Repeated,
        _ => component_args::FlagKind::Single,
    })
}

/// The flag `--<flag>` (its long name or an alias) of `skiff <command>`.
fn find_flag(command: &str, flag: &str) -> Option<clap::Arg> {
    use clap::CommandFactory;
    Cli::command()
        .find_subcommand(command)?
        .get_arguments()
        .find(|a| {
            a.get_long() == Some(flag) || a.get_all_aliases().is_some_and(|all| all.contains(&flag))
        })
        .cloned()
}

/// Runs a command's future to its end on a runtime from `runtime`: the
/// server and the agent get a multi-threaded one, the admin commands (a
/// few requests each) one on the current thread.
fn block_on(
    mut runtime: Builder,
    command: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    runtime.enable_all().build()?.block_on(command)
}

/// Resolves on SIGTERM or SIGINT: how `skiff agent` and `skiff server` both
/// learn they are to stop.
async fn termination_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use skiff_node::agent::AgentConfig;
    use skiff_node::agent::node::eviction::{EvictionHard, Threshold};

    use super::{Cli, Command};

    /// The node agent's configuration `skiff server <flags>` makes.
    fn server_node_config(flags: &[&str]) -> anyhow::Result<AgentConfig> {
        let args = ["skiff", "server"].iter().chain(flags);
        let Command::Server(server) = Cli::try_parse_from(args)?.command else {
            anyhow::bail!("not the server command");
        };
        server
            .node
            .agent_config(std::path::Path::new("/nonexistent"))
    }

    /// The config file counts a flag as set when its `SKIFF_*` variable is;
    /// that holds only while every flag's variable is named after it.
    #[test]
    fn every_server_and_agent_flag_has_the_variable_named_after_it() {
        use clap::CommandFactory;
        let cli = Cli::command();
        for name in ["server", "agent"] {
            let command = cli.find_subcommand(name).expect("subcommand");
            for arg in command.get_arguments() {
                let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
                    continue;
                };
                let expected = format!("SKIFF_{}", long.to_uppercase().replace('-', "_"));
                assert_eq!(
                    env.to_string_lossy(),
                    if long == "config" {
                        "SKIFF_CONFIG_FILE".to_string()
                    } else {
                        expected
                    },
                    "skiff {name} --{long}"
                );
            }
        }
    }

    #[test]
    fn kubeconfig_mode_and_node_port_range_are_read_as_k3s_and_upstream_write_them() {
        let parse = |extra: &[&str]| {
            let argv = ["skiff", "server"].iter().chain(extra).copied();
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Server(s)) => Ok(s),
                Ok(_) => panic!("not the server command"),
                Err(e) => Err(e.to_string()),
            }
        };
        let defaults = parse(&[]).expect("defaults");
        assert_eq!(defaults.write_kubeconfig_mode, None);
        assert_eq!(defaults.service_node_port_range, 30000..=32767);
        let set = parse(&[
            "-o",
            "/etc/skiff/admin.yaml",
            "--write-kubeconfig-mode",
            "644",
            "--service-node-port-range",
            "31000+10",
        ])
        .expect("flags");
        assert_eq!(
            set.write_kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/skiff/admin.yaml"))
        );
        assert_eq!(set.write_kubeconfig_mode, Some(0o644));
        assert_eq!(set.service_node_port_range, 31000..=31010);
        let range =
            |r: &str| parse(&["--service-node-port-range", r]).map(|s| s.service_node_port_range);
        assert_eq!(range("8000-8080").expect("range"), 8000..=8080);
        assert_eq!(range("31000").expect("one port"), 31000..=31000);
        for bad in ["32767-30000", "0-10", "30000-70000", "65535+1", "ports"] {
            let err = range(bad).expect_err(bad);
            assert!(err.contains("--service-node-port-range"), "{bad}: {err}");
        }
        for bad in ["888", "1777", "rw-r--r--"] {
            let err = parse(&["--write-kubeconfig-mode", bad]).expect_err(bad);
            assert!(err.contains("not a file mode"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_join_token_may_come_from_a_file_but_not_from_both() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("token");
        std::fs::write(&file, "K10abc::server:secret\n").expect("token");
        let path = file.to_string_lossy().into_owned();
        let Command::Agent(agent) = Cli::try_parse_from([
            "skiff",
            "agent",
            "--server",
            "https://10.0.0.1:6443",
            "--token-file",
            &path,
        ])
        .expect("a token file")
        .command
        else {
            panic!("not the agent command");
        };
        let read = crate::agent::read_token_file(agent.token_file.as_deref().expect("named"))
            .expect("read");
        assert_eq!(read, "K10abc::server:secret");
        let both = Cli::try_parse_from([
            "skiff",
            "agent",
            "--server",
            "https://10.0.0.1:6443",
            "--token",
            "x",
            "--token-file",
            &path,
        ]);
        assert!(both.is_err(), "--token and --token-file together");
        std::fs::write(&file, "  \n").expect("empty");
        let empty = crate::agent::read_token_file(&file).expect_err("empty");
        assert!(empty.to_string().contains("holds no join token"), "{empty}");
        let missing = crate::agent::read_token_file(&dir.path().join("none")).expect_err("missing");
        assert!(
            missing.to_string().contains("reading the join token"),
            "{missing}"
        );
    }

    #[test]
    fn a_config_file_sets_the_node_as_its_flags_would() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("config.yaml");
        std::fs::write(
            &file,
            "cgroups-per-qos: false\nmax-pods: 9\ndisable-agent: true\nnode-label: [a=b]\n",
        )
        .expect("config");
        let given: Vec<std::ffi::OsString> = ["skiff", "server", "--config"]
            .iter()
            .map(std::ffi::OsString::from)
            .chain([file.clone().into_os_string()])
            .collect();
        let (args, used) =
            crate::config_file::with_file_flags(given, |_| None, super::is_switch).expect("read");
        assert_eq!(used, Some(file));
        let Command::Server(server) = Cli::try_parse_from(args).expect("flags").command else {
            panic!("not the server command");
        };
        assert!(server.disable_agent);
        let config = server
            .node
            .agent_config(std::path::Path::new("/nonexistent"))
            .expect("node config");
        assert_eq!(config.cgroup_root, None, "cgroups-per-qos: false");
        assert_eq!(config.max_pods, 9);
        assert_eq!(config.node_labels.get("a").map(String::as_str), Some("b"));
    }

    #[test]
    fn every_upstream_setting_names_a_flag_of_the_commands_that_run_its_component() {
        for (component, upstream, target) in crate::component_args::SETTINGS {
            assert!(
                super::flag_kind("server", target).is_some(),
                "{component} --{upstream}: skiff server has no --{target}"
            );
            if *component == "kubelet" {
                assert!(
                    super::flag_kind("agent", target).is_some(),
                    "kubelet --{upstream}: skiff agent has no --{target}"
                );
            }
        }
    }

    #[test]
    fn a_k3s_config_file_with_component_args_and_etcd_snapshot_names_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("config.yaml");
        std::fs::write(
            &file,
            "kubelet-arg:\n  - max-pods=250\n  - register-with-taints=edge=true:NoSchedule\n\
             kube-apiserver-arg: [service-node-port-range=31000-31999]\n\
             etcd-disable-snapshots: true\netcd-snapshot-retention: 3\n",
        )
        .expect("config");
        let given: Vec<std::ffi::OsString> = ["skiff", "server", "--config"]
            .iter()
            .map(std::ffi::OsString::from)
            .chain([file.into_os_string()])
            .collect();
        let (args, _) =
            crate::config_file::with_file_flags(given, |_| None, super::is_switch).expect("read");
        let args = crate::component_args::translate(args, super::flag_kind).expect("translate");
        let Command::Server(server) = Cli::try_parse_from(args).expect("flags").command else {
            panic!("not the server command");
        };
        assert_eq!(server.service_node_port_range, 31000..=31999);
        assert!(server.disable_snapshots);
        assert_eq!(server.snapshot_retention, 3);
        let config = server
            .node
            .agent_config(std::path::Path::new("/nonexistent"))
            .expect("node config");
        assert_eq!(config.max_pods, 250);
        assert_eq!(config.node_taints.len(), 1, "{:?}", config.node_taints);
        assert_eq!(config.node_taints[0].key, "edge");
    }

    #[test]
    fn switches_are_told_from_flags_with_values() {
        assert!(super::is_switch("server", "disable-agent"));
        assert!(super::is_switch("agent", "disable-kube-proxy"));
        assert!(
            !super::is_switch("agent", "cgroups-per-qos"),
            "takes true or false"
        );
        // `anonymous-auth: false` in the file must reach the flag.
        assert!(
            !super::is_switch("server", "anonymous-auth"),
            "takes true or false"
        );
        assert!(!super::is_switch("server", "node-label"));
        assert!(!super::is_switch("server", "no-such-flag"));
    }

    #[test]
    fn k3s_disable_names_turn_off_skiffs_components() {
        let Command::Server(mut server) = Cli::try_parse_from([
            "skiff",
            "server",
            "--disable",
            "traefik,coredns",
            "--disable=servicelb",
            "--disable",
            "local-storage",
        ])
        .expect("k3s's names")
        .command
        else {
            panic!("not the server command");
        };
        crate::server::apply_disable(&mut server);
        assert!(server.ingress.disable_ingress);
        assert!(server.disable_cluster_dns);
        assert_eq!(
            crate::server::disabled_controllers(&server.disable),
            ["servicelb", "local-path-provisioner"]
        );
        let refused = Cli::try_parse_from(["skiff", "server", "--disable", "flannel"])
            .expect_err("not a component skiff packages");
        let said = refused.to_string();
        assert!(said.contains("possible values"), "{said}");
        assert!(said.contains("local-storage"), "{said}");
    }

    #[test]
    fn pod_cgroups_follow_the_kubelet_flags() {
        let default = server_node_config(&[]).expect("defaults");
        assert_eq!(default.cgroup_root.as_deref(), Some("/"));
        let rooted = server_node_config(&["--cgroup-root", "/edge"]).expect("a root");
        assert_eq!(rooted.cgroup_root.as_deref(), Some("/edge"));
        let off = server_node_config(&["--cgroups-per-qos=false"]).expect("off");
        assert_eq!(off.cgroup_root, None);
        assert_eq!(default.pod_max_pids, None);
        assert_eq!(default.max_pods, 110);
        assert_eq!(default.sync_frequency, std::time::Duration::from_secs(60));
        let often = server_node_config(&["--sync-frequency", "5s"]).expect("a period");
        assert_eq!(often.sync_frequency, std::time::Duration::from_secs(5));
        assert!(server_node_config(&["--sync-frequency", "0s"]).is_err());
        let few = server_node_config(&["--max-pods", "8"]).expect("max pods");
        assert_eq!(few.max_pods, 8);
        assert!(server_node_config(&["--max-pods", "0"]).is_err());
        let capped = server_node_config(&["--pod-max-pids", "128"]).expect("a cap");
        assert_eq!(capped.pod_max_pids, Some(128));
        let unlimited = server_node_config(&["--pod-max-pids", "-1"]).expect("unlimited");
        assert_eq!(unlimited.pod_max_pids, None);
    }

    #[test]
    fn eviction_hard_takes_the_kubelet_spelling_and_refuses_what_skiff_cannot_honour() {
        let config = server_node_config(&["--eviction-hard", "nodefs.available<5%"])
            .expect("a supported threshold");
        assert_eq!(
            config.eviction_hard.nodefs_available,
            Threshold::Fraction(0.05)
        );
        assert_eq!(
            config.eviction_hard.memory_available,
            EvictionHard::default().memory_available
        );

        let refused =
            Cli::try_parse_from(["skiff", "agent", "--eviction-hard", "imagefs.available<15%"])
                .expect_err("imagefs is not measured");
        assert!(
            refused
                .to_string()
                .contains("eviction signal \"imagefs.available\" is not supported"),
            "{refused}"
        );
    }

    #[test]
    fn reservations_add_up_and_refuse_what_cannot_be_reserved() {
        let config = server_node_config(&[
            "--system-reserved",
            "cpu=100m,memory=256Mi",
            "--kube-reserved",
            "cpu=150m,ephemeral-storage=1Gi",
        ])
        .expect("reservations");
        assert_eq!(
            (
                config.reserved.cpu_milli,
                config.reserved.memory,
                config.reserved.ephemeral_storage
            ),
            (250, 256 << 20, 1 << 30)
        );
        assert_eq!(
            server_node_config(&[]).expect("defaults").reserved,
            Default::default()
        );
        let refused = Cli::try_parse_from(["skiff", "agent", "--system-reserved", "hugepages=1"])
            .expect_err("huge pages are not reserved");
        assert!(
            refused
                .to_string()
                .contains("cannot reserve \"hugepages\" resource"),
            "{refused}"
        );
    }

    #[test]
    fn container_log_rotation_takes_the_kubelet_flags_and_their_bounds() {
        let default = server_node_config(&[]).expect("defaults");
        assert_eq!(default.log_rotation, Default::default());
        let set = server_node_config(&[
            "--container-log-max-size",
            "1Mi",
            "--container-log-max-files",
            "3",
            "--container-log-monitor-interval",
            "5s",
        ])
        .expect("rotation flags");
        assert_eq!(
            (set.log_rotation.max_size, set.log_rotation.max_files),
            (1 << 20, 3)
        );
        assert_eq!(set.log_rotation.interval, std::time::Duration::from_secs(5));
        for refused in [
            ["--container-log-max-files", "1"],
            ["--container-log-max-size", "0"],
            ["--container-log-monitor-interval", "1s"],
        ] {
            let args = ["skiff", "agent"].into_iter().chain(refused);
            assert!(Cli::try_parse_from(args).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn image_gc_flags_are_the_kubelets_and_low_stays_below_high() {
        let config = server_node_config(&[
            "--image-gc-high-threshold",
            "90",
            "--image-gc-low-threshold",
            "70",
            "--minimum-image-ttl-duration",
            "5m",
        ])
        .expect("valid thresholds");
        assert_eq!(
            (
                config.image_gc.high_threshold_percent,
                config.image_gc.low_threshold_percent,
                config.image_gc.minimum_age
            ),
            (90, 70, std::time::Duration::from_secs(300))
        );
        let refused = server_node_config(&["--image-gc-low-threshold", "90"])
            .expect_err("low above the default high of 85");
        assert_eq!(
            refused.to_string(),
            "--image-gc-low-threshold (90) must be less than --image-gc-high-threshold (85)"
        );
        assert!(server_node_config(&["--image-gc-high-threshold", "101"]).is_err());
    }
}
