//! The `kubernetes` Service's endpoints when several API servers share one
//! store, as upstream's lease endpoint reconciler: each server keeps a Lease
//! `kube-system/apiserver-<hash of its address>` (labelled
//! `apiserver.kubernetes.io/identity=kube-apiserver`, its advertised address
//! in an annotation), renewed every [`RENEW_EVERY`] with a short
//! [`LEASE_TTL`], and writes `default/kubernetes` Endpoints and
//! EndpointSlice listing every server whose lease is live, sorted. A server
//! that dies stops renewing; within the TTL (plus one renewal) the others
//! drop it, and a TTL later its Lease is deleted. Servers no longer overwrite each other's address, and every one
//! writes the same list, so writes stop once they agree.
//!
//! Servers normally share one port (as k3s's); when they do not, the
//! Endpoints carry one subset per port and there is one EndpointSlice per
//! port (`kubernetes`, then `kubernetes-<port>`). Clocks are taken to agree
//! within a fraction of the TTL, as upstream does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// Upstream's label of API server identity Leases.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// Its value for kube-apiserver.
pub const IDENTITY: &str = "kube-apiserver";
/// Where a server's Lease says which address it serves on.
pub const ADDRESS_ANNOTATION: &str = "skiff.io/advertise-address";
/// How long a Lease stays live without renewal (upstream's master lease
/// TTL).
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often a server renews its Lease and reconciles the endpoints.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
const LEASE_NAMESPACE: &str = "kube-system";
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Why a reconcile failed (retried at the next renewal).
#[derive(Debug, thiserror::Error)]
pub enum PeerEndpointsError {
    /// Reading or writing through the API failed.
    #[error("reconciling the kubernetes endpoints: {0}")]
    Api(#[from] kube::Error),
    /// An object this module built did not convert to its type.
    #[error("building the kubernetes endpoints: {0}")]
    Build(#[from] serde_json::Error),
}

/// The Lease name of the server at `address`: stable across restarts, one
/// per server.
pub fn lease_name(address: SocketAddr) -> String {
    let digest = Sha256::digest(address.to_string().as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("apiserver-{hex}")
}

/// Renews this server's Lease and reconciles the endpoints every
/// [`RENEW_EVERY`] until `shutdown` turns true.
pub(crate) async fn run(
    client: kube::Client,
    address: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(RENEW_EVERY) => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
        if let Err(error) = reconcile_once(&client, address).await {
            tracing::warn!(%error, "kubernetes endpoints not reconciled");
        }
    }
}

/// Renews the Lease of the server at `address`, then writes the endpoints
/// of every live server if they differ.
pub(crate) async fn reconcile_once(
    client: &kube::Client,
    address: SocketAddr,
) -> Result<(), PeerEndpointsError> {
    let now = Timestamp::now();
    renew(client, address, now).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let listed = leases
        .list(&ListParams::default().labels(&format!("{IDENTITY_LABEL}={IDENTITY}")))
        .await?;
    let mut live = live_addresses(&listed.items, now);
    // This server has just renewed; a lease list from a lagging cache may
    // not show it yet.
    live.insert(address);
    write_endpoints(client, &by_port(&live)).await?;
    forget_lapsed(&leases, &listed.items, now).await
}

/// Deletes the Leases of servers gone for longer than a TTL past their
/// expiry (as upstream's identity lease garbage collector), so the list
/// shows the servers there are; only the Lease that was judged.
async fn forget_lapsed(
    leases: &Api<Lease>,
    listed: &[Lease],
    now: Timestamp,
) -> Result<(), PeerEndpointsError> {
    let grace = SignedDuration::try_from(LEASE_TTL).unwrap_or(SignedDuration::ZERO);
    for lease in listed {
        if expiry(lease).is_none_or(|at| at + grace > now) {
            continue;
        }
        let name = lease.metadata.name.clone().unwrap_or_default();
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: lease.metadata.uid.clone(),
                resource_version: lease.metadata.resource_version.clone(),
            }),
            ..Default::default()
        };
        match leases.delete(&name, &params).await {
            Ok(_) => tracing::info!(lease = %name, "an API server's lease lapsed: deleted"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// When `lease` stops being live (None: it says nothing of it).
fn expiry(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?;
    let ttl = spec.lease_duration_seconds?;
    Some(renewed.0 + SignedDuration::from_secs(i64::from(ttl)))
}

async fn renew(
    client: &kube::Client,
    address: SocketAddr,
    now: Timestamp,
) -> Result<(), PeerEndpointsError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let name = lease_name(address);
    let wanted: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": LEASE_NAMESPACE,
            "labels": {IDENTITY_LABEL: IDENTITY},
            "annotations": {ADDRESS_ANNOTATION: address.to_string()},
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_TTL.as_secs(),
        },
    }))?;
    let mut lease = match leases.get_opt(&name).await? {
        Some(current) => Lease {
            metadata: kube::api::ObjectMeta {
                resource_version: current.metadata.resource_version,
                ..wanted.metadata
            },
            spec: wanted.spec,
        },
        None => wanted,
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.renew_time = Some(MicroTime(now));
    if lease.metadata.resource_version.is_some() {
        leases
            .replace(&name, &PostParams::default(), &lease)
            .await?;
    } else {
        match leases.create(&PostParams::default(), &lease).await {
            // Another start of this server won the create: the next
            // renewal replaces it.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// The addresses of the Leases still live at `now`.
pub fn live_addresses(leases: &[Lease], now: Timestamp) -> BTreeSet<SocketAddr> {
    leases
        .iter()
        .filter(|lease| expiry(lease).is_some_and(|at| at > now))
        .filter_map(|lease| {
            lease
                .metadata
                .annotations
                .as_ref()?
                .get(ADDRESS_ANNOTATION)?
                .parse::<SocketAddr>()
                .ok()
        })
        .collect()
}

/// The addresses grouped by port, each group's sorted.
pub fn by_port(addresses: &BTreeSet<SocketAddr>) -> BTreeMap<u16, BTreeSet<IpAddr>> {
    let mut groups: BTreeMap<u16, BTreeSet<IpAddr>> = BTreeMap::new();
    for address in addresses {
        groups
            .entry(address.port())
            .or_default()
            .insert(address.ip());
    }
    groups
}

async fn write_endpoints(
    client: &kube::Client,
    groups: &BTreeMap<u16, BTreeSet<IpAddr>>,
) -> Result<(), PeerEndpointsError> {
    let port_of = |port: u16| json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let subsets: Vec<_> = groups
        .iter()
        .map(|(port, ips)| {
            json!({
                "addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                "ports": port_of(*port),
            })
        })
        .collect();
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": subsets,
    }))?;
    let endpoints_api: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    put_if_changed(&endpoints_api, endpoints, |a, b| a.subsets == b.subsets).await?;

    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let mut wanted_names = BTreeSet::new();
    for (i, (port, ips)) in groups.iter().enumerate() {
        let name = if i == 0 {
            "kubernetes".to_string()
        } else {
            format!("kubernetes-{port}")
        };
        let family = if ips.iter().all(IpAddr::is_ipv4) {
            "IPv4"
        } else {
            "IPv6"
        };
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                "labels": {SERVICE_NAME_LABEL: "kubernetes"}},
            "addressType": family,
            "endpoints": ips.iter()
                .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
                .collect::<Vec<_>>(),
            "ports": port_of(*port),
        }))?;
        put_if_changed(&slices, slice, |a, b| {
            a.endpoints == b.endpoints && a.ports == b.ports && a.address_type == b.address_type
        })
        .await?;
        wanted_names.insert(name);
    }
    // Slices of a port no live server serves on any more.
    let listed = slices
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}=kubernetes")))
        .await?;
    for slice in listed.items {
        let name = slice.metadata.name.unwrap_or_default();
        if name.starts_with("kubernetes-") && !wanted_names.contains(&name) {
            match slices.delete(&name, &Default::default()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}

/// Creates `wanted`, or replaces the stored object when `same` says it
/// differs (so agreeing servers do not rewrite it every renewal).
async fn put_if_changed<K>(
    api: &Api<K>,
    mut wanted: K,
    same: impl Fn(&K, &K) -> bool,
) -> Result<(), PeerEndpointsError>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = wanted.meta().name.clone().unwrap_or_default();
    match api.get_opt(&name).await? {
        Some(current) if same(&current, &wanted) => Ok(()),
        Some(current) => {
            wanted.meta_mut().resource_version = current.meta().resource_version.clone();
            match api.replace(&name, &PostParams::default(), &wanted).await {
                // Another server wrote meanwhile: the next renewal looks again.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                other => other.map(|_| ()).map_err(Into::into),
            }
        }
        None => match api.create(&PostParams::default(), &wanted).await {
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            other => other.map(|_| ()).map_err(Into::into),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(address: &str, renewed_secs_ago: i64, ttl: i32) -> Lease {
        let renewed = Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago);
        serde_json::from_value(json!({
            "metadata": {"name": "x", "annotations": {ADDRESS_ANNOTATION: address}},
            "spec": {"renewTime": MicroTime(renewed), "leaseDurationSeconds": ttl},
        }))
        .unwrap()
    }

    #[test]
    fn only_live_leases_count_sorted() {
        let leases = [
            lease("10.0.0.9:6443", 1, 15),
            lease("10.0.0.2:6443", 3, 15),
            lease("10.0.0.5:6443", 20, 15),
            lease("not an address", 1, 15),
        ];
        let live: Vec<String> = live_addresses(&leases, Timestamp::now())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(live, ["10.0.0.2:6443", "10.0.0.9:6443"]);
    }

    #[test]
    fn addresses_group_by_port() {
        let addresses: BTreeSet<SocketAddr> = ["10.0.0.9:6443", "10.0.0.2:6443", "10.0.0.5:7443"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let groups = by_port(&addresses);
        let text: Vec<(u16, Vec<String>)> = groups
            .iter()
            .map(|(p, ips)| (*p, ips.iter().map(ToString::to_string).collect()))
            .collect();
        assert_eq!(
            text,
            [
                (6443, vec!["10.0.0.2".to_string(), "10.0.0.9".to_string()]),
                (7443, vec!["10.0.0.5".to_string()])
            ]
        );
    }

    #[test]
    fn each_address_has_its_own_lease() {
        let a = lease_name("10.0.0.1:6443".parse().unwrap());
        assert_eq!(a, lease_name("10.0.0.1:6443".parse().unwrap()));
        assert_ne!(a, lease_name("10.0.0.2:6443".parse().unwrap()));
        assert!(a.starts_with("apiserver-"));
    }
}
