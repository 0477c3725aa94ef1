//! The built-in ingress's flags (`--ingress-http-port`, `--ingress-https-port`,
//! `--disable-ingress`) and its start next to the other components.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use skiff_informer::SharedInformerFactory;
use tokio::sync::watch;

/// Flags of the built-in ingress controller.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct IngressFlags {
    /// Port the ingress serves plain HTTP on (every address).
    #[arg(long, env = "SKIFF_INGRESS_HTTP_PORT", default_value_t = 80)]
    pub ingress_http_port: u16,

    /// Port the ingress serves HTTPS on (every address).
    #[arg(long, env = "SKIFF_INGRESS_HTTPS_PORT", default_value_t = 443)]
    pub ingress_https_port: u16,

    /// Do not run the built-in ingress controller (IngressClass `skiff`).
    #[arg(long, env = "SKIFF_DISABLE_INGRESS")]
    pub disable_ingress: bool,
}

impl IngressFlags {
    /// The ingress's configuration, reporting `node_ip` in the status of
    /// the Ingresses it serves; None when disabled.
    pub(crate) fn config(&self, node_ip: IpAddr) -> Option<skiff_ingress::IngressConfig> {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        (!self.disable_ingress).then(|| {
            skiff_ingress::IngressConfig::new(
                SocketAddr::new(any, self.ingress_http_port),
                SocketAddr::new(any, self.ingress_https_port),
                vec![node_ip],
            )
        })
    }
}

/// Starts the ingress on `factory` (whose client is the ingress's own
/// identity) until `stop`. A port it cannot bind leaves the rest of the
/// process running, as the cluster DNS does.
pub(crate) fn spawn(
    components: &mut tokio::task::JoinSet<()>,
    factory: &SharedInformerFactory,
    config: skiff_ingress::IngressConfig,
    mut stop: watch::Receiver<bool>,
) {
    let factory = factory.clone();
    components.spawn(async move {
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(error) = skiff_ingress::run(&factory, config, stopped).await {
            tracing::error!(%error, "ingress not running");
        }
    });
}
