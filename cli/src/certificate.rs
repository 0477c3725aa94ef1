//! `skiff certificate rotate`, as k3s's command: re-issues the server's leaf
//! certificates (serving, admin, kubelet-client) in the data dir with the
//! same CA, and removes the node's serving certificate so the agent makes a
//! new one; the server uses them from its next start (which also rewrites
//! the admin kubeconfig). It works on files only, so run it with the server
//! stopped or restart the server afterwards. Rotating the CA is not offered.

use anyhow::Context;
use skiff_apiserver::tls::{CertLifetimes, ClusterCerts};

/// `skiff certificate` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct CertificateArgs {
    #[command(flatten)]
    pub data_dir: crate::data_dir::DataDir,

    /// Lifetime of issued leaf certificates, in days (for tests).
    #[arg(
        long,
        env = "SKIFF_CERTIFICATE_LIFETIME_DAYS",
        hide = true,
        global = true
    )]
    pub certificate_lifetime_days: Option<u64>,

    #[command(subcommand)]
    pub command: CertificateCommand,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum CertificateCommand {
    /// Re-issue the leaf certificates with the same CA.
    Rotate,
}

/// The certificate lifetimes a `--certificate-lifetime-days` value asks for.
pub(crate) fn lifetimes(days: Option<u64>) -> CertLifetimes {
    days.map_or_else(CertLifetimes::default, CertLifetimes::with_leaf_days)
}

/// Runs `skiff certificate ...`.
pub(crate) fn run(args: CertificateArgs) -> anyhow::Result<()> {
    match args.command {
        CertificateCommand::Rotate => rotate(&args),
    }
}

fn rotate(args: &CertificateArgs) -> anyhow::Result<()> {
    let tls = args.data_dir.path.join("tls");
    if !tls.join("ca.crt").exists() {
        anyhow::bail!(
            "no cluster certificates in {} (is --data-dir right?)",
            tls.display()
        );
    }
    let certs = ClusterCerts::rotate_leaves(
        &args.data_dir.path,
        &lifetimes(args.certificate_lifetime_days),
    )
    .context("re-issuing the certificates")?;
    for name in ["serving", "admin", "kubelet-client"] {
        println!(
            "rotated {}",
            certs.dir.join(format!("{name}.crt")).display()
        );
    }
    let pki = args.data_dir.path.join("agent").join("pki");
    for file in [
        skiff_node::agent::identity::serving_cert::CERT_FILE,
        skiff_node::agent::identity::serving_cert::KEY_FILE,
    ] {
        match std::fs::remove_file(pki.join(file)) {
            Ok(()) => println!(
                "removed {} (the node issues a new one)",
                pki.join(file).display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("removing {}", pki.join(file).display()));
            }
        }
    }
    println!("restart skiff server to use the new certificates");
    Ok(())
}
