//! The `--data-dir` flag of the commands that work on an installed server's
//! or node's files (`skiff certificate`, `images`, `secrets-encrypt`,
//! `snapshot`): one definition, so every command finds the same directory
//! from the same flag, environment variable and default.

use std::path::PathBuf;

/// `--data-dir` (or `SKIFF_DATA_DIR`), global so it may follow the
/// subcommand as k3s users write it.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DataDir {
    /// The server's or node's data directory (store, certificates,
    /// kubeconfig, and the agent's containerd under `agent/`).
    #[arg(
        id = "data_dir",
        long = "data-dir",
        value_name = "DATA_DIR",
        env = "SKIFF_DATA_DIR",
        default_value = "/var/lib/skiff",
        global = true
    )]
    pub path: PathBuf,
}
