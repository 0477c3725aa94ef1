//! Node identities for the hollow nodes of a joined agent (`skiff agent
//! --simulated-nodes N`). Each hollow node goes through the same kubelet
//! TLS bootstrap as a real agent ([`crate::agent::identity::join`]): a
//! CertificateSigningRequest for `kubernetes.io/kube-apiserver-client-kubelet`
//! made with the join token, carrying a node password of its own, approved
//! and signed by the cluster's controllers. It then writes only as
//! `system:node:<its name>`, so the agent's token grants it nothing a real
//! kubelet would not have.
//!
//! Each node keeps its key, certificate and password under
//! `AGENT_DIR/simulated/<name>/` and reuses them after a restart, so a
//! restarted agent asks for no new certificates. Bootstraps run a bounded
//! number at a time: each one is a CSR the signer must handle and a TLS
//! connection the server must hold.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use skiff_common::join_token::JoinToken;

use crate::agent::identity::join::{self, JoinConfig, JoinError, Joined};

/// Hollow nodes bootstrapping at once.
pub const BOOTSTRAP_CONCURRENCY: usize = 32;

/// Where hollow node `name` of the agent in `agent_dir` keeps its
/// credentials.
pub fn node_dir(agent_dir: &Path, name: &str) -> PathBuf {
    agent_dir.join("simulated").join(name)
}

/// Gives every node in `names` its own client certificate (stored, or
/// through the bootstrap with `token`) against `server`, whose CA `ca_pem`
/// the caller has already checked against the token; returns them in the
/// order of `names`.
pub async fn join_all(
    server: &str,
    token: &JoinToken,
    ca_pem: &str,
    agent_dir: &Path,
    names: Vec<String>,
) -> Result<Vec<Joined>, JoinError> {
    let total = names.len();
    let joined: Vec<Result<Joined, JoinError>> = futures::stream::iter(names)
        .map(|name| {
            let config = JoinConfig {
                server: server.to_string(),
                token: token.clone(),
                agent_dir: node_dir(agent_dir, &name),
                node_name: name,
            };
            let ca_pem = ca_pem.to_string();
            async move { join::join_with_ca(&config, ca_pem).await }
        })
        .buffered(BOOTSTRAP_CONCURRENCY)
        .collect()
        .await;
    let joined = joined.into_iter().collect::<Result<Vec<_>, _>>()?;
    tracing::info!(
        nodes = total,
        "every simulated node holds its own client certificate"
    );
    Ok(joined)
}
