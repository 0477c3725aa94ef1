//! Core resources (services, endpoints, nodes, namespaces, events, config and
//! storage objects), Leases, and the defaults for everything else.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::age::{human_duration, seconds_since};
use super::columns::{
    Column, Printer, age, at, deleting, int, joined, list, map_selector_string, name,
    name_age_printer, one_column_printer, or_none, strings, text, text_cell,
};

pub(crate) static SERVICES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string("Type", "type determines how the Service is exposed."),
        Column::string(
            "Cluster-IP",
            "clusterIP is the IP address of the service and is usually assigned randomly by the master.",
        ),
        Column::string(
            "External-IP",
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        Column::string(
            "Port(s)",
            "The list of ports that are exposed by this service.",
        ),
        Column::AGE,
        Column::string(
            "Selector",
            "Route service traffic to pods with label keys and values matching this selector.",
        )
        .wide(),
    ],
    cells: |svc, now| {
        let kind = text(svc, "spec/type").unwrap_or("ClusterIP");
        vec![
            name(svc),
            Value::from(kind),
            or_none(text(svc, "spec/clusterIP").unwrap_or("")),
            Value::from(service_external_ip(svc, kind)),
            or_none(service_ports(svc)),
            age(svc, now),
            or_none(map_selector_string(at(svc, "spec/selector"))),
        ]
    },
};

fn service_external_ip(svc: &Value, kind: &str) -> String {
    let external = strings(svc, "spec/externalIPs");
    match kind {
        "ExternalName" => text(svc, "spec/externalName").unwrap_or("").to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<String> = list(svc, "status/loadBalancer/ingress")
                .iter()
                .filter_map(|i| text(i, "ip").or_else(|| text(i, "hostname")))
                .map(String::from)
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        _ if external.is_empty() => "<none>".to_string(),
        _ => external.join(","),
    }
}

fn service_ports(svc: &Value) -> String {
    list(svc, "spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = text(p, "protocol").unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(node_port) if node_port != 0 => format!("{port}:{node_port}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) static ENDPOINTS: Printer = one_column_printer!(
    Column::string("Endpoints", "Endpoints of the service"),
    |ep| Value::from(endpoint_list(ep)),
);

/// At most three `ip:port` entries, then "+ N more...".
fn endpoint_list(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = list(ep, "subsets");
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut shown = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let addresses: Vec<&str> = list(subset, "addresses")
            .iter()
            .filter_map(|a| text(a, "ip"))
            .collect();
        let ports = list(subset, "ports");
        if ports.is_empty() {
            count += addresses.len();
            shown.extend(addresses.iter().map(|ip| ip.to_string()));
            continue;
        }
        for port in ports {
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            count += addresses.len();
            shown.extend(addresses.iter().map(|ip| {
                if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                }
            }));
        }
    }
    if count > MAX {
        shown.truncate(MAX);
        format!("{} + {} more...", shown.join(","), count - MAX)
    } else {
        shown.join(",")
    }
}

pub(crate) static NODES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string("Status", "The status of the node"),
        Column::string("Roles", "The roles of the node"),
        Column::AGE,
        Column::string("Version", "Kubelet Version reported by the node."),
        Column::string(
            "Internal-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available.",
        )
        .wide(),
        Column::string(
            "External-IP",
            "List of addresses reachable to the node. Queried from cloud provider, if available.",
        )
        .wide(),
        Column::string(
            "OS-Image",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        )
        .wide(),
        Column::string(
            "Kernel-Version",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        )
        .wide(),
        Column::string(
            "Container-Runtime",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        )
        .wide(),
    ],
    cells: |node, now| {
        let address = |kind: &str| {
            list(node, "status/addresses")
                .iter()
                .find(|a| text(a, "type") == Some(kind))
                .and_then(|a| text(a, "address"))
                .unwrap_or("")
                .to_string()
        };
        let info = |field: &str| {
            let value = text(node, &format!("status/nodeInfo/{field}")).unwrap_or("");
            Value::from(if value.is_empty() { "<unknown>" } else { value })
        };
        vec![
            name(node),
            Value::from(node_status(node)),
            or_none(node_roles(node)),
            age(node, now),
            text_cell(node, "status/nodeInfo/kubeletVersion", ""),
            or_none(address("InternalIP")),
            or_none(address("ExternalIP")),
            info("osImage"),
            info("kernelVersion"),
            info("containerRuntimeVersion"),
        ]
    },
};

fn node_status(node: &Value) -> String {
    let ready = list(node, "status/conditions")
        .iter()
        .find(|c| text(c, "type") == Some("Ready"));
    let mut status = match ready.and_then(|c| text(c, "status")) {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if at(node, "spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(node: &Value) -> String {
    let mut roles: Vec<String> = at(node, "metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(key, value)| {
                    if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                        Some(role.to_string())
                    } else if key == "kubernetes.io/role" {
                        value.as_str().map(String::from)
                    } else {
                        None
                    }
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    roles.join(",")
}

pub(crate) static NAMESPACES: Printer = one_column_printer!(
    Column::string("Status", "The status of the namespace"),
    |ns| text_cell(ns, "status/phase", ""),
);

/// Events' columns, the same for core/v1 and events.k8s.io/v1 events.
const EVENT_COLUMNS: &[Column] = &[
    Column::string("Last Seen", "Time when last event was observed"),
    Column::string(
        "Type",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    Column::string(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    Column::string("Object", "The object that this event is about."),
    Column::string("Subobject", "The subobject that this event is about.").wide(),
    Column::string(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
    )
    .wide(),
    Column::string(
        "Message",
        "A human-readable description of the status of this operation.",
    ),
    Column::string(
        "First Seen",
        "The time at which the event was first recorded.",
    )
    .wide(),
    Column::string("Count", "The number of times this event has occurred.").wide(),
    Column::NAME.wide(),
];

/// core/v1 Events: `LAST SEEN TYPE REASON OBJECT MESSAGE`, with `-o wide`
/// also the subobject, source, first seen, count and name.
pub(crate) static EVENTS: Printer = Printer {
    columns: EVENT_COLUMNS,
    cells: event_cells,
};

/// events.k8s.io/v1 Events print as core/v1 ones: upstream converts both to
/// one type before printing, so the v1 object is renamed back (`regarding`
/// to `involvedObject`, `note` to `message`, the `deprecated*` fields and
/// `reportingController`) the way storage does.
pub(crate) static EVENTS_V1: Printer = Printer {
    columns: EVENT_COLUMNS,
    cells: |ev, now| event_cells(&crate::registry::event_v1_to_core(ev.clone()), now),
};

fn event_cells(ev: &Value, now: Timestamp) -> Vec<Value> {
    let since = |path: &str| at(ev, path).and_then(|t| seconds_since(t, now));
    let first = since("firstTimestamp").or_else(|| since("eventTime"));
    // A series keeps its own count and last sighting; otherwise the last
    // timestamp (else the first) and the count, which singleton events of
    // the new API leave unset though they happened once.
    let (last, count) = match at(ev, "series") {
        Some(series) => (
            at(series, "lastObservedTime").and_then(|t| seconds_since(t, now)),
            int(series, "count"),
        ),
        None => (since("lastTimestamp").or(first), int(ev, "count").max(1)),
    };
    let kind = text(ev, "involvedObject/kind").unwrap_or("").to_lowercase();
    let object = match text(ev, "involvedObject/name").filter(|n| !n.is_empty()) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    // The source's component and host, else the reporting controller and
    // instance that events.k8s.io events carry instead.
    let either = |old: &str, new: &str| {
        text(ev, old)
            .filter(|s| !s.is_empty())
            .or_else(|| text(ev, new))
            .unwrap_or("")
    };
    let component = either("source/component", "reportingComponent");
    let source = match either("source/host", "reportingInstance") {
        "" => component.to_string(),
        instance => format!("{component}, {instance}"),
    };
    let human = |s: Option<i64>| {
        s.map(human_duration)
            .unwrap_or_else(|| "<unknown>".to_string())
    };
    vec![
        Value::from(human(last)),
        text_cell(ev, "type", ""),
        text_cell(ev, "reason", ""),
        Value::from(object),
        text_cell(ev, "involvedObject/fieldPath", ""),
        Value::from(source),
        Value::from(text(ev, "message").unwrap_or("").trim().to_string()),
        Value::from(human(first)),
        Value::from(count),
        name(ev),
    ]
}

/// The column of ConfigMaps and Secrets counting their [`entries`].
const DATA: Column = Column::integer("Data", "Number of data entries");

fn entries(object: &Value, field: &str) -> usize {
    object
        .get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

pub(crate) static CONFIGMAPS: Printer = one_column_printer!(DATA, |cm| {
    Value::from(entries(cm, "data") + entries(cm, "binaryData"))
});

/// ComponentStatuses: `NAME STATUS MESSAGE ERROR`, the status read from the
/// `Healthy` condition (`Unknown` without one).
pub(crate) static COMPONENT_STATUSES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string("Status", "Status of the component conditions"),
        Column::string("Message", "Message of the component conditions"),
        Column::string("Error", "Error of the component conditions"),
    ],
    cells: |cs, _| {
        let healthy = list(cs, "conditions")
            .iter()
            .find(|c| c["type"] == "Healthy")
            .cloned()
            .unwrap_or_default();
        let status = match healthy["status"].as_str() {
            None => "Unknown",
            Some("True") => "Healthy",
            Some(_) => "Unhealthy",
        };
        vec![
            name(cs),
            Value::from(status),
            Value::from(healthy["message"].as_str().unwrap_or("")),
            Value::from(healthy["error"].as_str().unwrap_or("")),
        ]
    },
};

pub(crate) static SECRETS: Printer = name_age_printer!(
    [Column::string("Type", "The type of the secret"), DATA],
    |secret, _| {
        vec![
            text_cell(secret, "type", "Opaque"),
            Value::from(entries(secret, "data")),
        ]
    },
);

pub(crate) static SERVICEACCOUNTS: Printer = one_column_printer!(
    Column::string(
        "Secrets",
        "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount",
    ),
    |sa| Value::from(list(sa, "secrets").len()),
);

fn access_modes(object: &Value, path: &str) -> String {
    list(object, path)
        .iter()
        .filter_map(Value::as_str)
        .map(|mode| match mode {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A volume's or claim's phase, `Terminating` once its deletion began (it
/// waits on the protection finalizers while its phase still reads Bound).
fn volume_phase(object: &Value) -> &str {
    if deleting(object) {
        "Terminating"
    } else {
        text(object, "status/phase").unwrap_or("")
    }
}

fn unset(value: Option<&str>) -> Value {
    Value::from(value.filter(|v| !v.is_empty()).unwrap_or("<unset>"))
}

pub(crate) static PERSISTENTVOLUMES: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "Capacity",
            "capacity is the description of the persistent volume's resources and capacity.",
        ),
        Column::string(
            "Access Modes",
            "accessModes contains all ways the volume can be mounted.",
        ),
        Column::string(
            "Reclaim Policy",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        Column::string(
            "Status",
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        Column::string(
            "Claim",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        Column::string(
            "StorageClass",
            "storageClassName is the name of StorageClass to which this persistent volume belongs.",
        ),
        Column::string(
            "VolumeAttributesClass",
            "VolumeAttributesClass is the name of the VolumeAttributesClass this persistent volume belongs to.",
        ),
        Column::string(
            "Reason",
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        Column::AGE,
        Column::string(
            "VolumeMode",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        )
        .wide(),
    ],
    cells: |pv, now| {
        let claim = joined(pv, "spec/claimRef/namespace", "spec/claimRef/name").unwrap_or_default();
        vec![
            name(pv),
            text_cell(pv, "spec/capacity/storage", ""),
            Value::from(access_modes(pv, "spec/accessModes")),
            text_cell(pv, "spec/persistentVolumeReclaimPolicy", ""),
            Value::from(volume_phase(pv)),
            Value::from(claim),
            text_cell(pv, "spec/storageClassName", ""),
            unset(text(pv, "spec/volumeAttributesClassName")),
            text_cell(pv, "status/reason", ""),
            age(pv, now),
            text_cell(pv, "spec/volumeMode", "Filesystem"),
        ]
    },
};

pub(crate) static PERSISTENTVOLUMECLAIMS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "Status",
            "Status is the current status of a persistent volume claim.",
        ),
        Column::string(
            "Volume",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        Column::string(
            "Capacity",
            "capacity represents the actual resources of the underlying volume.",
        ),
        Column::string(
            "Access Modes",
            "accessModes contains the desired access modes the volume should have.",
        ),
        Column::string(
            "StorageClass",
            "storageClassName is the name of the StorageClass required by the claim.",
        ),
        Column::string(
            "VolumeAttributesClass",
            "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
        ),
        Column::AGE,
        Column::string(
            "VolumeMode",
            "volumeMode defines what type of volume is required by the claim.",
        )
        .wide(),
    ],
    cells: |pvc, now| {
        vec![
            name(pvc),
            Value::from(volume_phase(pvc)),
            text_cell(pvc, "spec/volumeName", ""),
            text_cell(pvc, "status/capacity/storage", ""),
            Value::from(access_modes(pvc, "status/accessModes")),
            text_cell(pvc, "spec/storageClassName", ""),
            unset(text(pvc, "spec/volumeAttributesClassName")),
            age(pvc, now),
            text_cell(pvc, "spec/volumeMode", "Filesystem"),
        ]
    },
};

pub(crate) static LEASES: Printer = one_column_printer!(
    Column::string("Holder", "The holder of the lease"),
    |lease| text_cell(lease, "spec/holderIdentity", ""),
);

/// Each hard resource as `name: used/hard`, limits in their own column.
pub(crate) static RESOURCEQUOTAS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::AGE,
        Column::string(
            "Request",
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        Column::string(
            "Limit",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ],
    cells: |quota, now| {
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for name in quota["spec"]["hard"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, _)| n)
        {
            let figure = |section: &str| {
                quota["status"][section][name.as_str()]
                    .as_str()
                    .and_then(skiff_common::amount::Amount::parse)
                    .unwrap_or(skiff_common::amount::Amount::ZERO)
                    .to_string()
            };
            let cell = format!("{name}: {}/{}", figure("used"), figure("hard"));
            if name.split('.').next() == Some("limits") && name.contains('.') {
                limits.push(cell);
            } else {
                requests.push(cell);
            }
        }
        vec![
            name(quota),
            age(quota, now),
            Value::from(requests.join(", ")),
            Value::from(limits.join(", ")),
        ]
    },
};

/// NAME and CREATED AT, as CustomResourceDefinitions print.
pub(crate) static CREATED_AT: Printer = Printer {
    columns: &[Column::NAME, Column::CREATED_AT],
    cells: |object, _| {
        vec![
            name(object),
            at(object, "metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        ]
    },
};

/// NAME and AGE for every resource without a printer of its own.
pub(crate) static DEFAULT: Printer = Printer {
    columns: &[Column::NAME, Column::AGE],
    cells: default_cells,
};

fn default_cells(object: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(object), age(object, now)]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::test_now as now;

    #[test]
    fn service_cells_by_type() {
        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.43.0.12",
            "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        let c = (SERVICES.cells)(&svc, now());
        assert_eq!(
            &c[1..5],
            &[
                json!("NodePort"),
                json!("10.43.0.12"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(c[6], "app=web");
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.43.0.13", "ports": []}});
        let c = (SERVICES.cells)(&lb, now());
        assert_eq!(
            (c[3].clone(), c[4].clone()),
            (json!("<pending>"), json!("<none>"))
        );
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
        assert_eq!((SERVICES.cells)(&lb, now())[3], "192.0.2.1");
    }

    #[test]
    fn endpoints_show_three_then_count_the_rest() {
        let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [
            {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}, {"ip": "10.0.0.5"}],
            "ports": [{"port": 80}]}]});
        assert_eq!(
            endpoint_list(&ep),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more..."
        );
        assert_eq!(endpoint_list(&json!({})), "<none>");
    }

    #[test]
    fn node_status_roles_and_runtime() {
        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": "true"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "192.0.2.5"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.0", "containerRuntimeVersion": "containerd://1.6.20"}}});
        let c = (NODES.cells)(&node, now());
        assert_eq!(
            &c[1..3],
            &[
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,master")
            ]
        );
        assert_eq!(c[4], "v1.33.0");
        assert_eq!(c[5], "192.0.2.5");
        assert_eq!(c[6], "<none>");
        assert_eq!(c[7], "<unknown>");
        assert_eq!(c[9], "containerd://1.6.20");
        let unknown = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!((NODES.cells)(&unknown, now())[1], "NotReady");
    }

    #[test]
    fn config_and_secret_counts() {
        let cm =
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}});
        assert_eq!((CONFIGMAPS.cells)(&cm, now())[1], 2);
        let secret = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            &(SECRETS.cells)(&secret, now())[1..3],
            &[json!("kubernetes.io/tls"), json!(2)]
        );
    }

    #[test]
    fn events_name_the_object_and_count() {
        let ev = json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "FailedScheduling",
            "involvedObject": {"kind": "Pod", "name": "web-1"}, "message": "0/3 nodes are available",
            "source": {"component": "default-scheduler"}, "count": 4,
            "firstTimestamp": "2026-01-01T00:50:00Z", "lastTimestamp": "2026-01-01T00:59:00Z"});
        let c = (EVENTS.cells)(&ev, now());
        assert_eq!(
            &c[0..4],
            &[
                json!("60s"),
                json!("Warning"),
                json!("FailedScheduling"),
                json!("pod/web-1")
            ]
        );
        assert_eq!(c[5], "default-scheduler");
        assert_eq!(c[7], "10m");
        assert_eq!(c[8], 4);
    }

    #[test]
    fn events_k8s_io_events_print_as_core_ones() {
        let ev = json!({"apiVersion": "events.k8s.io/v1", "metadata": {"name": "e2"},
            "type": "Normal", "reason": "Pulled", "action": "Pull",
            "regarding": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{web}"},
            "note": "Pulled the image ", "reportingController": "kubelet",
            "reportingInstance": "node-a", "eventTime": "2026-01-01T00:50:00.000000Z"});
        assert_eq!(
            (EVENTS_V1.cells)(&ev, now()),
            [
                json!("10m"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/web-1"),
                json!("spec.containers{web}"),
                json!("kubelet, node-a"),
                json!("Pulled the image"),
                json!("10m"),
                json!(1),
                json!("e2")
            ]
        );
        let series = json!({"metadata": {"name": "e3"}, "regarding": {"kind": "Node"},
            "deprecatedCount": 9, "deprecatedFirstTimestamp": "2026-01-01T00:30:00Z",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:58:00.000000Z"}});
        let c = (EVENTS_V1.cells)(&series, now());
        assert_eq!(
            (&c[0], &c[3], &c[7], &c[8]),
            (&json!("2m"), &json!("node"), &json!("30m"), &json!(3))
        );
    }

    #[test]
    fn pv_and_pvc_cells() {
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "default", "name": "data"}, "storageClassName": "local"},
            "status": {"phase": "Bound"}});
        let c = (PERSISTENTVOLUMES.cells)(&pv, now());
        assert_eq!(
            &c[1..9],
            &[
                json!("1Gi"),
                json!("RWO,ROX"),
                json!("Retain"),
                json!("Bound"),
                json!("default/data"),
                json!("local"),
                json!("<unset>"),
                json!("")
            ]
        );
    }
}
