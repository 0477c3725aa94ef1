//! `/configz`: the configuration this node runs with, as a kubelet answers
//! it — `{"kubeletconfig": {...}}` in KubeletConfiguration's field names
//! (`kubectl get --raw /api/v1/nodes/<node>/proxy/configz`). Written once at
//! start from the agent's settings; `get nodes/proxy` to the authorizer.
//! Only settings skiff has are listed, each as the flag set it.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use skiff_common::duration::format_go_duration;

use super::NodeState;
use crate::agent::AgentConfig;

/// A duration as KubeletConfiguration prints one (`1m0s`, `10s`).
fn duration(d: std::time::Duration) -> Value {
    json!(format_go_duration(
        i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
    ))
}

/// `systemReserved` and `kubeReserved` together, as quantities; only what
/// is reserved.
fn reserved(config: &AgentConfig) -> Value {
    let r = &config.reserved;
    let mut out = Map::new();
    if r.cpu_milli > 0 {
        out.insert("cpu".into(), json!(format!("{}m", r.cpu_milli)));
    }
    for (name, amount) in [
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
        ("pid", r.pids),
    ] {
        if amount > 0 {
            out.insert(name.into(), json!(amount.to_string()));
        }
    }
    Value::Object(out)
}

/// The node's configuration in KubeletConfiguration's field names.
pub(crate) fn kubelet_config(config: &AgentConfig, address: &str, port: u16) -> Value {
    let eviction = &config.eviction_hard;
    let mut out = json!({
        "enableServer": true,
        "address": address,
        "port": port,
        "syncFrequency": duration(config.sync_frequency),
        "nodeStatusUpdateFrequency": duration(config.heartbeat_interval),
        "nodeStatusReportFrequency": "1m0s",
        "clusterDomain": config.dns.domain,
        "clusterDNS": config.dns.servers.iter().map(|ip| ip.to_string()).collect::<Vec<_>>(),
        "resolvConf": config.dns.resolv_conf.to_string_lossy(),
        "maxPods": config.max_pods,
        "podPidsLimit": config.pod_max_pids.unwrap_or(-1),
        "evictionHard": {
            "memory.available": eviction.memory_available.to_string(),
            "nodefs.available": eviction.nodefs_available.to_string(),
        },
        "imageGCHighThresholdPercent": config.image_gc.high_threshold_percent,
        "imageGCLowThresholdPercent": config.image_gc.low_threshold_percent,
        "imageMinimumGCAge": duration(config.image_gc.minimum_age),
        "containerLogMaxSize": config.log_rotation.max_size.to_string(),
        "containerLogMaxFiles": config.log_rotation.max_files,
        "containerLogMonitorInterval": duration(config.log_rotation.interval),
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": config.cgroup_root.is_some(),
        "cgroupRoot": config.cgroup_root.as_deref().unwrap_or(""),
        "registerNode": true,
        "authentication": {
            "webhook": {"enabled": true, "cacheTTL": "2m0s"},
            "anonymous": {"enabled": false},
        },
        "authorization": {
            "mode": "Webhook",
            "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"},
        },
    });
    let reserved = reserved(config);
    if let Some(fields) = out.as_object_mut() {
        if reserved.as_object().is_some_and(|r| !r.is_empty()) {
            fields.insert("systemReserved".into(), reserved);
        }
        if !config.node_taints.is_empty() {
            fields.insert("registerWithTaints".into(), json!(config.node_taints));
        }
        if let Some(endpoint) = &config.runtime.external_endpoint {
            fields.insert("containerRuntimeEndpoint".into(), json!(endpoint));
        }
    }
    out
}

/// `/configz`.
pub(crate) async fn configz(State(state): State<NodeState>) -> Response {
    let body = json!({ "kubeletconfig": Arc::clone(&state.configz).as_ref() });
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_shown_in_kubelet_configuration_names() {
        let mut config = AgentConfig::new("n1", "/var/lib/skiff/agent");
        config.max_pods = 50;
        config.sync_frequency = std::time::Duration::from_secs(60);
        config.node_taints = vec![k8s_openapi::api::core::v1::Taint {
            key: "dedicated".into(),
            value: Some("edge".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }];
        let shown = kubelet_config(&config, "192.0.2.7", 10250);
        assert_eq!(shown["maxPods"], 50);
        assert_eq!(shown["syncFrequency"], "1m0s");
        assert_eq!(shown["port"], 10250);
        assert_eq!(shown["evictionHard"]["memory.available"], "104857600");
        assert_eq!(shown["evictionHard"]["nodefs.available"], "10%");
        assert_eq!(shown["registerWithTaints"][0]["key"], "dedicated");
        assert_eq!(shown["clusterDomain"], "cluster.local");
        assert!(
            shown.get("systemReserved").is_none(),
            "nothing reserved: {shown}"
        );
        config.reserved.cpu_milli = 250;
        config.reserved.memory = 1 << 30;
        let shown = kubelet_config(&config, "192.0.2.7", 10250);
        assert_eq!(
            shown["systemReserved"],
            json!({"cpu": "250m", "memory": "1073741824"})
        );
    }
}
