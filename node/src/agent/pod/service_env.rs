//! The variables a kubelet gives every container about Services: where the
//! API server's `kubernetes` Service is (always, from the `default`
//! namespace: in-cluster clients find the API through
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`), and, when the
//! pod keeps `enableServiceLinks` (the default), the same for each Service
//! of its own namespace, with the Docker-link style `_PORT_*` variables.
//! Only Services with a cluster IP have any. A container's own `env` wins
//! over these, and may refer to them with `$(VAR)`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

/// The namespace and name of the Service every pod is told about.
const API_SERVICE: (&str, &str) = ("default", "kubernetes");

/// The service variables of `pod`, by name, from the node's view of
/// `services` (every namespace's).
pub(crate) fn for_pod<'a>(
    pod: &Pod,
    services: impl IntoIterator<Item = &'a Service>,
) -> BTreeMap<String, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    // By Service name: a Service of the pod's namespace takes the place of
    // `default/kubernetes` when it has the same name.
    let mut told: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services {
        let (Some(ns), Some(name)) = (
            service.metadata.namespace.as_deref(),
            service.metadata.name.as_deref(),
        ) else {
            continue;
        };
        if cluster_ip(service).is_none() {
            continue;
        }
        if links && ns == namespace {
            told.insert(name, service);
        } else if (ns, name) == API_SERVICE {
            told.entry(name).or_insert(service);
        }
    }
    let mut vars = BTreeMap::new();
    for (name, service) in told {
        variables(name, service, &mut vars);
    }
    vars
}

/// The Service's cluster IP, unless it has none (headless or unset).
fn cluster_ip(service: &Service) -> Option<&str> {
    service
        .spec
        .as_ref()?
        .cluster_ip
        .as_deref()
        .filter(|ip| !ip.is_empty() && *ip != "None")
}

/// `my-svc` → `MY_SVC`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// The variables of one Service named `name`: host and port (the first
/// port, then each named one by name), and per port the link variables.
fn variables(name: &str, service: &Service, vars: &mut BTreeMap<String, String>) {
    let (Some(ip), Some(spec)) = (cluster_ip(service), service.spec.as_ref()) else {
        return;
    };
    let ports = spec.ports.as_deref().unwrap_or_default();
    let prefix = env_name(name);
    vars.insert(format!("{prefix}_SERVICE_HOST"), ip.to_string());
    let Some(first) = ports.first() else {
        return;
    };
    vars.insert(format!("{prefix}_SERVICE_PORT"), first.port.to_string());
    for port in ports {
        if let Some(port_name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            vars.insert(
                format!("{prefix}_SERVICE_PORT_{}", env_name(port_name)),
                port.port.to_string(),
            );
        }
    }
    // IPv6 addresses go in brackets, as in any URL.
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    for (i, port) in ports.iter().enumerate() {
        let protocol = port.protocol.as_deref().unwrap_or("TCP");
        let url = format!("{}://{host}:{}", protocol.to_lowercase(), port.port);
        if i == 0 {
            vars.insert(format!("{prefix}_PORT"), url.clone());
        }
        let at = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
        vars.insert(format!("{at}_PROTO"), protocol.to_lowercase());
        vars.insert(format!("{at}_PORT"), port.port.to_string());
        vars.insert(format!("{at}_ADDR"), ip.to_string());
        vars.insert(at, url);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).expect("service")
    }

    fn pod(namespace: &str, links: Option<bool>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": namespace},
            "spec": {"containers": [], "enableServiceLinks": links}
        }))
        .expect("pod")
    }

    fn services() -> Vec<Service> {
        vec![
            service(
                json!({"metadata": {"name": "kubernetes", "namespace": "default"},
                "spec": {"clusterIP": "10.43.0.1",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}),
            ),
            service(json!({"metadata": {"name": "my-web", "namespace": "shop"},
                "spec": {"clusterIP": "10.43.7.9", "ports": [
                    {"name": "http", "port": 80},
                    {"name": "dns-udp", "port": 53, "protocol": "UDP"}]}})),
            service(
                json!({"metadata": {"name": "headless", "namespace": "shop"},
                "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
            ),
            service(
                json!({"metadata": {"name": "elsewhere", "namespace": "other"},
                "spec": {"clusterIP": "10.43.3.3", "ports": [{"port": 80}]}}),
            ),
            service(json!({"metadata": {"name": "v6", "namespace": "shop"},
                "spec": {"clusterIP": "fd00::5", "ports": [{"port": 8080}]}})),
        ]
    }

    #[test]
    fn a_pod_learns_its_namespaces_services_and_the_api_servers() {
        let vars = for_pod(&pod("shop", None), &services());
        let want = [
            ("KUBERNETES_SERVICE_HOST", "10.43.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.43.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.43.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.43.0.1"),
            ("MY_WEB_SERVICE_HOST", "10.43.7.9"),
            ("MY_WEB_SERVICE_PORT", "80"),
            ("MY_WEB_SERVICE_PORT_HTTP", "80"),
            ("MY_WEB_SERVICE_PORT_DNS_UDP", "53"),
            ("MY_WEB_PORT", "tcp://10.43.7.9:80"),
            ("MY_WEB_PORT_80_TCP", "tcp://10.43.7.9:80"),
            ("MY_WEB_PORT_80_TCP_PROTO", "tcp"),
            ("MY_WEB_PORT_80_TCP_PORT", "80"),
            ("MY_WEB_PORT_80_TCP_ADDR", "10.43.7.9"),
            ("MY_WEB_PORT_53_UDP", "udp://10.43.7.9:53"),
            ("MY_WEB_PORT_53_UDP_PROTO", "udp"),
            ("MY_WEB_PORT_53_UDP_PORT", "53"),
            ("MY_WEB_PORT_53_UDP_ADDR", "10.43.7.9"),
            ("V6_SERVICE_HOST", "fd00::5"),
            ("V6_SERVICE_PORT", "8080"),
            ("V6_PORT", "tcp://[fd00::5]:8080"),
            ("V6_PORT_8080_TCP", "tcp://[fd00::5]:8080"),
            ("V6_PORT_8080_TCP_PROTO", "tcp"),
            ("V6_PORT_8080_TCP_PORT", "8080"),
            ("V6_PORT_8080_TCP_ADDR", "fd00::5"),
        ];
        let want: BTreeMap<String, String> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(vars, want);
    }

    #[test]
    fn without_service_links_only_the_api_server_is_told() {
        let vars = for_pod(&pod("shop", Some(false)), &services());
        assert!(
            vars.keys().all(|k| k.starts_with("KUBERNETES_")),
            "{vars:?}"
        );
        assert_eq!(vars["KUBERNETES_SERVICE_HOST"], "10.43.0.1");
    }

    #[test]
    fn a_namespaces_own_kubernetes_service_takes_the_place_of_the_api_servers() {
        let mut all = services();
        all.push(service(
            json!({"metadata": {"name": "kubernetes", "namespace": "shop"},
            "spec": {"clusterIP": "10.43.9.9", "ports": [{"port": 80}]}}),
        ));
        assert_eq!(
            for_pod(&pod("shop", None), &all)["KUBERNETES_SERVICE_HOST"],
            "10.43.9.9"
        );
        all.reverse();
        assert_eq!(
            for_pod(&pod("shop", None), &all)["KUBERNETES_SERVICE_HOST"],
            "10.43.9.9"
        );
        assert_eq!(
            for_pod(&pod("other", None), &all)["KUBERNETES_SERVICE_HOST"],
            "10.43.0.1"
        );
    }
}
