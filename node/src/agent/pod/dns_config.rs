//! A pod's resolv.conf (the CRI sandbox's DNS config) per `dnsPolicy`, and
//! its host name, with upstream's semantics:
//!
//! - `ClusterFirst` (the default): the cluster DNS, searching
//!   `<ns>.svc.<domain> svc.<domain> <domain>` then the host's search list,
//!   `ndots:5`. Host-network pods get `Default` instead, and so does every pod
//!   when no cluster DNS is configured.
//! - `ClusterFirstWithHostNet`: `ClusterFirst`, host network or not.
//! - `Default`: the node's resolv.conf.
//! - `None`: only the pod's `dnsConfig`.
//!
//! The pod's `dnsConfig` is merged on top: nameservers and searches are
//! appended without duplicates, options replace same-named ones. The result
//! is cut to the resolver's limits (3 nameservers, 32 search domains).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use crate::runtime::cri_api as api;

/// glibc uses at most this many nameservers.
const MAX_NAMESERVERS: usize = 3;
/// Upstream's limit on search domains.
const MAX_SEARCHES: usize = 32;
/// Upstream's limit on the search line's length.
const MAX_SEARCH_CHARS: usize = 2048;
/// Longest host name the kernel accepts.
const MAX_HOSTNAME: usize = 63;

/// What the node knows about cluster DNS.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterDnsSettings {
    /// The cluster DNS addresses pods are told to use (the `kube-dns`
    /// Service's ClusterIP); empty: pods get the node's resolv.conf.
    pub servers: Vec<IpAddr>,
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// The node's resolv.conf, for `Default` and the host search list.
    pub resolv_conf: PathBuf,
}

impl Default for ClusterDnsSettings {
    fn default() -> Self {
        Self {
            servers: vec![IpAddr::from([10, 43, 0, 10])],
            domain: "cluster.local".into(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
        }
    }
}

/// A parsed resolv.conf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolvConf {
    /// `nameserver` lines.
    pub servers: Vec<String>,
    /// The `search` (or `domain`) list; the last line wins, as in glibc.
    pub searches: Vec<String>,
    /// `options` words.
    pub options: Vec<String>,
}

impl ResolvConf {
    /// Parses resolv.conf text; unknown lines are ignored.
    pub fn parse(text: &str) -> Self {
        let mut conf = Self::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => conf.servers.extend(words.next().map(str::to_owned)),
                Some("search") | Some("domain") => {
                    conf.searches = words.map(str::to_owned).collect();
                }
                Some("options") => conf.options.extend(words.map(str::to_owned)),
                _ => {}
            }
        }
        conf
    }

    /// Reads and parses `path`; an unreadable file is empty (pods then get
    /// no host nameservers, as upstream does for a missing file).
    pub fn read(path: &Path) -> Self {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read the node's resolv.conf");
                Self::default()
            }
        }
    }
}

/// The node-wide inputs of every pod's DNS config, read once per agent.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDnsInputs {
    /// Cluster DNS settings.
    pub cluster: ClusterDnsSettings,
    /// The node's resolv.conf.
    pub host: ResolvConf,
}

impl PodDnsInputs {
    /// Reads the node's resolv.conf named in `cluster`.
    pub fn load(cluster: &ClusterDnsSettings) -> Self {
        Self {
            host: ResolvConf::read(&cluster.resolv_conf),
            cluster: cluster.clone(),
        }
    }
}

/// The sandbox DNS config of `pod`.
pub fn sandbox_dns(pod: &Pod, inputs: &PodDnsInputs) -> api::DnsConfig {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let cluster_first = match policy {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        _ => false,
    };
    let mut conf = if policy == "None" {
        ResolvConf::default()
    } else if cluster_first && !inputs.cluster.servers.is_empty() {
        let domain = &inputs.cluster.domain;
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut searches = vec![
            format!("{namespace}.svc.{domain}"),
            format!("svc.{domain}"),
            domain.clone(),
        ];
        searches.extend(inputs.host.searches.iter().cloned());
        ResolvConf {
            servers: inputs
                .cluster
                .servers
                .iter()
                .map(IpAddr::to_string)
                .collect(),
            searches,
            options: vec!["ndots:5".into()],
        }
    } else {
        inputs.host.clone()
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        conf.servers
            .extend(extra.nameservers.iter().flatten().cloned());
        conf.searches
            .extend(extra.searches.iter().flatten().cloned());
        for option in extra.options.iter().flatten() {
            let Some(name) = option.name.as_deref() else {
                continue;
            };
            conf.options.retain(|o| option_name(o) != name);
            conf.options.push(match option.value.as_deref() {
                Some(value) => format!("{name}:{value}"),
                None => name.to_owned(),
            });
        }
    }
    api::DnsConfig {
        servers: limited(dedup(conf.servers), MAX_NAMESERVERS),
        searches: limit_searches(dedup(conf.searches)),
        options: conf.options,
    }
}

/// The sandbox host name: `spec.hostname` or the pod name, cut to 63
/// characters; with `setHostnameAsFQDN` and a subdomain, the full
/// `<host>.<subdomain>.<ns>.svc.<domain>`.
pub fn sandbox_hostname(pod: &Pod, domain: &str) -> String {
    let spec = pod.spec.as_ref();
    let host = pod_hostname(pod);
    let subdomain = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty());
    match subdomain {
        Some(subdomain) if spec.and_then(|s| s.set_hostname_as_fqdn) == Some(true) => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            format!("{host}.{subdomain}.{namespace}.svc.{domain}")
        }
        _ => host,
    }
}

/// The pod's host name: `spec.hostname` or the pod name, cut to 63
/// characters.
pub(crate) fn pod_hostname(pod: &Pod) -> String {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let host = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or(name);
    truncate_hostname(&host)
}

/// Cuts a host name to 63 characters without leaving a trailing `-` or `.`.
fn truncate_hostname(host: &str) -> String {
    if host.len() <= MAX_HOSTNAME {
        return host.to_owned();
    }
    host[..MAX_HOSTNAME].trim_end_matches(['-', '.']).to_owned()
}

fn option_name(option: &str) -> &str {
    option.split(':').next().unwrap_or(option)
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|i| !i.is_empty() && seen.insert(i.clone()))
        .collect()
}

fn limited(mut items: Vec<String>, max: usize) -> Vec<String> {
    items.truncate(max);
    items
}

fn limit_searches(searches: Vec<String>) -> Vec<String> {
    let mut total = 0;
    searches
        .into_iter()
        .take(MAX_SEARCHES)
        .take_while(|s| {
            total += s.len() + 1;
            total <= MAX_SEARCH_CHARS
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs() -> PodDnsInputs {
        PodDnsInputs {
            cluster: ClusterDnsSettings::default(),
            host: ResolvConf::parse(
                "nameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example\noptions timeout:2\n",
            ),
        }
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-0", "namespace": "shop"},
            "spec": spec
        }))
        .unwrap()
    }

    fn conf(c: &api::DnsConfig) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            c.servers.iter().map(String::as_str).collect(),
            c.searches.iter().map(String::as_str).collect(),
            c.options.iter().map(String::as_str).collect(),
        )
    }

    #[test]
    fn cluster_first_uses_the_cluster_dns_and_search_path() {
        let c = sandbox_dns(&pod(json!({"containers": []})), &inputs());
        assert_eq!(
            conf(&c),
            (
                vec!["10.43.0.10"],
                vec![
                    "shop.svc.cluster.local",
                    "svc.cluster.local",
                    "cluster.local",
                    "corp.example"
                ],
                vec!["ndots:5"]
            )
        );
    }

    #[test]
    fn host_network_pods_follow_the_host_unless_with_host_net() {
        let hostnet = pod(json!({"containers": [], "hostNetwork": true}));
        let c = sandbox_dns(&hostnet, &inputs());
        assert_eq!(c.servers, ["192.0.2.53", "192.0.2.54"]);
        let with = pod(json!({"containers": [], "hostNetwork": true,
            "dnsPolicy": "ClusterFirstWithHostNet"}));
        assert_eq!(sandbox_dns(&with, &inputs()).servers, ["10.43.0.10"]);
    }

    #[test]
    fn default_policy_and_no_cluster_dns_give_the_host_resolv_conf() {
        let c = sandbox_dns(&pod(json!({"dnsPolicy": "Default"})), &inputs());
        assert_eq!(
            conf(&c),
            (
                vec!["192.0.2.53", "192.0.2.54"],
                vec!["corp.example"],
                vec!["timeout:2"]
            )
        );
        let mut no_cluster = inputs();
        no_cluster.cluster.servers.clear();
        let c = sandbox_dns(&pod(json!({})), &no_cluster);
        assert_eq!(c.servers, ["192.0.2.53", "192.0.2.54"]);
    }

    #[test]
    fn none_takes_only_the_pod_dns_config() {
        let p = pod(json!({"dnsPolicy": "None", "dnsConfig": {
            "nameservers": ["1.1.1.1"], "searches": ["a.example"],
            "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}}));
        let c = sandbox_dns(&p, &inputs());
        assert_eq!(
            conf(&c),
            (vec!["1.1.1.1"], vec!["a.example"], vec!["ndots:2", "edns0"])
        );
    }

    #[test]
    fn dns_config_merges_into_cluster_first_and_limits_apply() {
        let p = pod(json!({"dnsConfig": {
            "nameservers": ["10.43.0.10", "1.1.1.1", "8.8.8.8", "9.9.9.9"],
            "searches": ["svc.cluster.local", "extra.example"],
            "options": [{"name": "ndots", "value": "1"}]}}));
        let c = sandbox_dns(&p, &inputs());
        assert_eq!(
            c.servers,
            ["10.43.0.10", "1.1.1.1", "8.8.8.8"],
            "3 at most, no duplicates"
        );
        assert_eq!(c.searches.last().map(String::as_str), Some("extra.example"));
        assert_eq!(
            c.searches
                .iter()
                .filter(|s| *s == "svc.cluster.local")
                .count(),
            1
        );
        assert_eq!(
            c.options,
            ["ndots:1"],
            "the pod's option replaces the default"
        );
    }

    #[test]
    fn resolv_conf_parsing_keeps_the_last_search_line() {
        let r = ResolvConf::parse(
            "# c\ndomain old.example\nsearch a.example b.example ; trailing\nnameserver 10.0.0.1\noptions ndots:1 rotate\n",
        );
        assert_eq!(r.searches, ["a.example", "b.example"]);
        assert_eq!(r.servers, ["10.0.0.1"]);
        assert_eq!(r.options, ["ndots:1", "rotate"]);
    }

    #[test]
    fn hostnames_use_spec_hostname_subdomain_and_the_63_char_limit() {
        assert_eq!(sandbox_hostname(&pod(json!({})), "cluster.local"), "web-0");
        let named = pod(json!({"hostname": "db", "subdomain": "pg"}));
        assert_eq!(sandbox_hostname(&named, "cluster.local"), "db");
        let fqdn = pod(json!({"hostname": "db", "subdomain": "pg", "setHostnameAsFQDN": true}));
        assert_eq!(
            sandbox_hostname(&fqdn, "cluster.local"),
            "db.pg.shop.svc.cluster.local"
        );
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        let p = pod(json!({"hostname": long}));
        assert_eq!(sandbox_hostname(&p, "cluster.local"), "a".repeat(62));
    }
}
