//! `skiff secrets-encrypt status|rotate-keys|reencrypt`, as k3s's command:
//! it talks to the running server (the admin endpoints under
//! `/v1-skiff/encrypt/`) with the admin kubeconfig of the data dir or
//! `--kubeconfig`, so it works while the server runs and is authorized like
//! any other request.

use anyhow::Context;
use skiff_apiserver::encryption::{
    EncryptionStatus, ProviderKind, REENCRYPT_PATH, ROTATE_KEYS_PATH, STATUS_PATH,
};

/// `skiff secrets-encrypt` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct SecretsEncryptArgs {
    #[command(flatten)]
    pub target: crate::admin_client::ServerTarget,

    /// Print the server's answer as JSON.
    #[arg(long, short = 'o', value_parser = ["text", "json"], default_value = "text", global = true)]
    pub output: String,

    #[command(subcommand)]
    pub command: SecretsEncryptCommand,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SecretsEncryptCommand {
    /// Show whether Secrets are encrypted, the keys, and whether every
    /// Secret uses the active key.
    Status,
    /// Make a new key the writing key; the old ones stay for reading.
    RotateKeys,
    /// Rewrite every Secret with the active key, then compact and
    /// defragment the store so no older copy is left on disk.
    Reencrypt,
}

/// Runs `skiff secrets-encrypt ...`.
pub(crate) async fn run(args: SecretsEncryptArgs) -> anyhow::Result<()> {
    let client = args.target.client().await?;
    let (method, path) = match args.command {
        SecretsEncryptCommand::Status => (http::Method::GET, STATUS_PATH),
        SecretsEncryptCommand::RotateKeys => (http::Method::POST, ROTATE_KEYS_PATH),
        SecretsEncryptCommand::Reencrypt => (http::Method::POST, REENCRYPT_PATH),
    };
    let answer = crate::admin_client::call(&client, method, path).await?;
    if args.output == "json" {
        println!("{answer}");
        return Ok(());
    }
    let status: EncryptionStatus =
        serde_json::from_str(&answer).context("reading the server's answer")?;
    print!("{}", render(&status));
    Ok(())
}

/// The status as k3s prints it: a summary, then the keys with the active
/// one starred.
fn render(status: &EncryptionStatus) -> String {
    let mut out = String::new();
    let state = if status.enabled {
        "Enabled"
    } else {
        "Disabled"
    };
    out.push_str(&format!("Encryption Status: {state}\n"));
    if !status.mode.is_empty() {
        out.push_str(&format!(
            "Encryption Configuration: {} ({})\n",
            status.mode, status.config_path
        ));
        out.push_str(&format!(
            "Encrypted Resources: {}\n",
            status.resources.join(", ")
        ));
        out.push_str(&format!("Current Rotation Stage: {}\n", status.stage));
        let using = status.objects - status.stale.min(status.objects);
        out.push_str(&format!(
            "Objects Using The Active Key: {using}/{}\n",
            status.objects
        ));
    }
    if let Some(rewritten) = status.rewritten {
        out.push_str(&format!("Objects Re-encrypted: {rewritten}\n"));
    }
    if !status.keys.is_empty() {
        out.push_str("\nActive  Key Type   Name\n------  ---------  ----\n");
        for key in &status.keys {
            let kind: &str = match ProviderKind::from_name(&key.provider) {
                Some(kind) => kind.cipher_name(),
                None => &key.provider,
            };
            let active = if key.active { " *" } else { "" };
            out.push_str(&format!("{active:<6}  {kind:<9}  {}\n", key.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_apiserver::encryption::KeyStatus;

    #[test]
    fn status_reads_like_k3s() {
        let status = EncryptionStatus {
            enabled: true,
            mode: "managed".into(),
            config_path: "/d/cred/encryption-config.json".into(),
            resources: vec!["secrets".into()],
            keys: vec![
                KeyStatus {
                    provider: "aescbc".into(),
                    name: "aescbckey-2".into(),
                    active: true,
                },
                KeyStatus {
                    provider: "identity".into(),
                    name: String::new(),
                    active: false,
                },
            ],
            objects: 3,
            stale: 1,
            stage: "reencrypt_required".into(),
            rewritten: None,
        };
        let text = render(&status);
        assert!(text.starts_with("Encryption Status: Enabled\n"), "{text}");
        assert!(text.contains("Current Rotation Stage: reencrypt_required\n"));
        assert!(text.contains("Objects Using The Active Key: 2/3\n"));
        assert!(text.contains(" *      AES-CBC    aescbckey-2\n"), "{text}");
        assert!(render(&EncryptionStatus::default()).starts_with("Encryption Status: Disabled"));
    }
}
