//! The client of the server's admin endpoints (`skiff secrets-encrypt`,
//! `skiff snapshot`): the admin kubeconfig of the data dir or
//! `--kubeconfig`, so these commands work while the server runs and are
//! authenticated and authorized like any other request.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Which server an admin command talks to: the one whose data dir holds
/// the admin kubeconfig, or the one `--kubeconfig` names.
#[derive(Debug, clap::Args)]
pub(crate) struct ServerTarget {
    #[command(flatten)]
    pub data_dir: crate::data_dir::DataDir,

    /// Talk to the server with this kubeconfig instead.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
}

impl ServerTarget {
    /// A client of the server with the chosen kubeconfig.
    pub(crate) async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = self
            .kubeconfig
            .clone()
            .unwrap_or_else(|| self.data_dir.path.join("kubeconfig.yaml"));
        client(&kubeconfig).await
    }
}

/// A client from `kubeconfig`.
pub(crate) async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))?;
    kube::Client::try_from(config).context("building the API client")
}

/// Sends one bodiless request to `path` (with its query) and returns the
/// answer's body; a refusal is the server's Status message.
pub(crate) async fn call(
    client: &kube::Client,
    method: http::Method,
    path: &str,
) -> anyhow::Result<String> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .body(Vec::new())
        .context("building the request")?;
    client
        .request_text(request)
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) => anyhow::anyhow!("{}", status.message),
            other => anyhow::Error::new(other),
        })
        .with_context(|| format!("asking the server at {path}"))
}
