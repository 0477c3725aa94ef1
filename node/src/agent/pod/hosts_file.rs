//! The `/etc/hosts` a pod's containers see, as a kubelet writes it: the
//! loopback names, the pod's own address under its host name (and its
//! fully qualified name when it has a subdomain), and the pod's
//! `hostAliases`; a host-network pod gets the node's file with its aliases.
//! Without it a container sees whatever its image holds, often nothing, so
//! neither `localhost` nor its own name resolves.

use k8s_openapi::api::core::v1::Pod;

use super::dns_config;

const HEADER: &str = "# Kubernetes-managed hosts file.\n";
const HOST_NETWORK_HEADER: &str = "# Kubernetes-managed hosts file (host network).\n";
const LOOPBACK: &str = "127.0.0.1\tlocalhost\n\
::1\tlocalhost ip6-localhost ip6-loopback\n\
fe00::0\tip6-localnet\n\
fe00::0\tip6-mcastprefix\n\
fe00::1\tip6-allnodes\n\
fe00::2\tip6-allrouters\n";

/// The file for `pod` at `pod_ip`; `node_hosts` is the node's own file,
/// which a host-network pod sees.
pub(crate) fn content(pod: &Pod, pod_ip: &str, domain: &str, node_hosts: &str) -> String {
    let spec = pod.spec.as_ref();
    let mut out = String::new();
    if spec.and_then(|s| s.host_network) == Some(true) {
        out.push_str(HOST_NETWORK_HEADER);
        out.push_str(node_hosts);
    } else {
        out.push_str(HEADER);
        out.push_str(LOOPBACK);
        let host = dns_config::pod_hostname(pod);
        let subdomain = spec
            .and_then(|s| s.subdomain.as_deref())
            .filter(|s| !s.is_empty());
        if !pod_ip.is_empty() {
            match subdomain {
                Some(subdomain) => {
                    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
                    out.push_str(&format!(
                        "{pod_ip}\t{host}.{subdomain}.{namespace}.svc.{domain}\t{host}\n"
                    ));
                }
                None => out.push_str(&format!("{pod_ip}\t{host}\n")),
            }
        }
    }
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in aliases {
            let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
            out.push_str(&format!("{}\t{names}\n", alias.ip));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "shop"}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_sees_loopback_its_own_name_and_its_aliases() {
        let p = pod(serde_json::json!({
            "containers": [],
            "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}]
        }));
        let text = content(&p, "10.42.0.7", "cluster.local", "");
        assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(text.contains("\n10.42.0.7\tweb-0\n"), "{text}");
        assert!(
            text.ends_with("\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
            "{text}"
        );
    }

    #[test]
    fn a_subdomain_adds_the_fully_qualified_name_and_host_network_the_nodes_file() {
        let p = pod(serde_json::json!({"containers": [], "hostname": "db", "subdomain": "pg"}));
        let text = content(&p, "10.42.0.8", "cluster.local", "");
        assert!(
            text.contains("\n10.42.0.8\tdb.pg.shop.svc.cluster.local\tdb\n"),
            "{text}"
        );
        let host = pod(serde_json::json!({"containers": [], "hostNetwork": true}));
        let text = content(&host, "192.0.2.1", "cluster.local", "127.0.0.1 localhost\n");
        assert_eq!(
            text,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"
        );
    }
}
