//! A Service port's ready endpoints, as its EndpointSlices in the watch
//! cache list them: where the API server sends a webhook's service
//! reference and the services proxy, as kube-apiserver's endpoint routing
//! reads the slices. The caches answer; no request goes through the API.

use serde_json::Value;

use crate::server::Inner;

/// The ready endpoints (the slices' `endpoints` entries) of the port named
/// `port_name` of Service `namespace/service`, each with its slice's number
/// for that port. An endpoint is ready unless its condition says otherwise.
pub(crate) fn ready(
    inner: &Inner,
    namespace: &str,
    service: &str,
    port_name: &str,
) -> Vec<(Value, u64)> {
    let slices = crate::admission_plugins::namespace_objects(
        inner,
        "discovery.k8s.io",
        "endpointslices",
        namespace,
    );
    let mut out = Vec::new();
    for slice in slices
        .iter()
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"].as_str() == Some(service))
    {
        let Some(port) = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
        else {
            continue;
        };
        out.extend(
            slice["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|endpoint| endpoint["conditions"]["ready"] != Value::Bool(false))
                .map(|endpoint| (endpoint.clone(), port)),
        );
    }
    out
}
