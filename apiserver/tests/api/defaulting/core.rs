//! core/v1: Pods (containers, probes, lifecycle hooks, every volume
//! source, host networking, resources), Services, Namespaces, Secrets,
//! PersistentVolumes and claims, ReplicationControllers, Endpoints,
//! LimitRanges.

use serde_json::{Value, json};

use super::{Case, run};
use crate::harness::Client;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

/// A one-container pod with `volumes` (a JSON array): the body of every
/// volume case.
fn volume_pod(name: &str, volumes: Value) -> Value {
    pod(
        name,
        json!({"containers": [{"name": "c", "image": "busybox:1.36"}], "volumes": volumes}),
    )
}

#[tokio::test]
async fn pods_are_defaulted_as_upstream() {
    let toleration = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    run(vec![
        Case {
            what: "a minimal pod",
            path: PODS,
            body: pod("minimal", json!({"containers": [{"name": "c", "image": "busybox"}]})),
            want: vec![
                ("/spec/restartPolicy", json!("Always")),
                ("/spec/terminationGracePeriodSeconds", json!(30)),
                ("/spec/dnsPolicy", json!("ClusterFirst")),
                ("/spec/schedulerName", json!("default-scheduler")),
                ("/spec/securityContext", json!({})),
                ("/spec/enableServiceLinks", json!(true)),
                ("/spec/priority", json!(0)),
                ("/spec/preemptionPolicy", json!("PreemptLowerPriority")),
                ("/spec/serviceAccountName", json!("default")),
                (
                    "/spec/tolerations",
                    json!([
                        toleration("node.kubernetes.io/not-ready"),
                        toleration("node.kubernetes.io/unreachable")
                    ]),
                ),
                ("/spec/containers/0/imagePullPolicy", json!("Always")),
                (
                    "/spec/containers/0/terminationMessagePath",
                    json!("/dev/termination-log"),
                ),
                ("/spec/containers/0/terminationMessagePolicy", json!("File")),
                ("/spec/containers/0/resources", json!({})),
                ("/spec/containers/0/resizePolicy", Value::Null),
                ("/spec/hostNetwork", Value::Null),
                ("/status/phase", json!("Pending")),
                ("/status/qosClass", json!("BestEffort")),
            ],
        },
        Case {
            what: "probes and hooks that name only a port",
            path: PODS,
            body: pod(
                "probes",
                json!({"containers": [{"name": "c", "image": "busybox:1.36",
                    "ports": [{"containerPort": 80}],
                    "livenessProbe": {"httpGet": {"port": 80}},
                    "readinessProbe": {"tcpSocket": {"port": 80}},
                    "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2},
                    "lifecycle": {"postStart": {"httpGet": {"port": 80}},
                        "preStop": {"exec": {"command": ["true"]}}}}],
                    "initContainers": [{"name": "i", "image": "busybox:1.36",
                        "env": [{"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}),
            ),
            want: vec![
                ("/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
                ("/spec/containers/0/ports/0/protocol", json!("TCP")),
                ("/spec/containers/0/ports/0/hostPort", Value::Null),
                (
                    "/spec/containers/0/livenessProbe",
                    json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                        "timeoutSeconds": 1, "periodSeconds": 10,
                        "successThreshold": 1, "failureThreshold": 3}),
                ),
                (
                    "/spec/containers/0/readinessProbe",
                    json!({"tcpSocket": {"port": 80}, "timeoutSeconds": 1, "periodSeconds": 10,
                        "successThreshold": 1, "failureThreshold": 3}),
                ),
                ("/spec/containers/0/startupProbe/periodSeconds", json!(2)),
                ("/spec/containers/0/startupProbe/failureThreshold", json!(3)),
                (
                    "/spec/containers/0/lifecycle/postStart/httpGet",
                    json!({"port": 80, "path": "/", "scheme": "HTTP"}),
                ),
                (
                    "/spec/containers/0/lifecycle/preStop",
                    json!({"exec": {"command": ["true"]}}),
                ),
                ("/spec/initContainers/0/imagePullPolicy", json!("IfNotPresent")),
                (
                    "/spec/initContainers/0/terminationMessagePolicy",
                    json!("File"),
                ),
                (
                    "/spec/initContainers/0/env/0/valueFrom/fieldRef/apiVersion",
                    json!("v1"),
                ),
            ],
        },
        Case {
            what: "host networking and resources",
            path: PODS,
            body: pod(
                "host",
                json!({"hostNetwork": true, "containers": [{"name": "c", "image": "busybox:1.36",
                    "ports": [{"containerPort": 8080}],
                    "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]}),
            ),
            want: vec![
                ("/spec/containers/0/ports/0/hostPort", json!(8080)),
                (
                    "/spec/containers/0/resources/requests",
                    json!({"cpu": "500m", "memory": "64Mi"}),
                ),
                (
                    "/spec/containers/0/resizePolicy",
                    json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                        {"resourceName": "memory", "restartPolicy": "NotRequired"}]),
                ),
                ("/status/qosClass", json!("Guaranteed")),
            ],
        },
        Case {
            what: "a volume naming no source",
            path: PODS,
            body: volume_pod("v-none", json!([{"name": "v"}])),
            want: vec![("/spec/volumes/0", json!({"name": "v", "emptyDir": {}}))],
        },
        Case {
            what: "secret, configMap and downwardAPI volumes",
            path: PODS,
            body: volume_pod(
                "v-files",
                json!([
                    {"name": "s", "secret": {"secretName": "x"}},
                    {"name": "m", "configMap": {"name": "x"}},
                    {"name": "d", "downwardAPI": {"items": [{"path": "n",
                        "fieldRef": {"fieldPath": "metadata.name"}}]}}]),
            ),
            want: vec![
                (
                    "/spec/volumes/0/secret",
                    json!({"secretName": "x", "defaultMode": 420}),
                ),
                (
                    "/spec/volumes/1/configMap",
                    json!({"name": "x", "defaultMode": 420}),
                ),
                ("/spec/volumes/2/downwardAPI/defaultMode", json!(420)),
                (
                    "/spec/volumes/2/downwardAPI/items/0/fieldRef",
                    json!({"apiVersion": "v1", "fieldPath": "metadata.name"}),
                ),
            ],
        },
        Case {
            what: "a projected volume",
            path: PODS,
            body: volume_pod(
                "v-projected",
                json!([{"name": "p", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}},
                    {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"configMap": {"name": "x"}}]}}]),
            ),
            want: vec![
                ("/spec/volumes/0/projected/defaultMode", json!(420)),
                (
                    "/spec/volumes/0/projected/sources/0/serviceAccountToken",
                    json!({"path": "token", "expirationSeconds": 3600}),
                ),
                (
                    "/spec/volumes/0/projected/sources/1/downwardAPI/items/0/fieldRef/apiVersion",
                    json!("v1"),
                ),
                (
                    "/spec/volumes/0/projected/sources/2/configMap",
                    json!({"name": "x"}),
                ),
            ],
        },
        Case {
            what: "hostPath, emptyDir and ephemeral volumes",
            path: PODS,
            body: volume_pod(
                "v-host",
                json!([
                    {"name": "h", "hostPath": {"path": "/tmp"}},
                    {"name": "e", "emptyDir": {"medium": "Memory"}},
                    {"name": "t", "ephemeral": {"volumeClaimTemplate": {"spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}}}]),
            ),
            want: vec![
                ("/spec/volumes/0/hostPath", json!({"path": "/tmp", "type": ""})),
                ("/spec/volumes/1/emptyDir", json!({"medium": "Memory"})),
                (
                    "/spec/volumes/2/ephemeral/volumeClaimTemplate/spec/volumeMode",
                    json!("Filesystem"),
                ),
            ],
        },
        Case {
            what: "network block volumes (iSCSI, RBD, Azure Disk, ScaleIO)",
            path: PODS,
            body: volume_pod(
                "v-block",
                json!([
                    {"name": "i", "iscsi": {"targetPortal": "10.0.0.1:3260",
                        "iqn": "iqn.2001-04.com.example:storage", "lun": 0}},
                    {"name": "r", "rbd": {"monitors": ["10.0.0.2:6789"], "image": "img"}},
                    {"name": "a", "azureDisk": {"diskName": "d", "diskURI": "https://example.com/d"}},
                    {"name": "s", "scaleIO": {"gateway": "https://gw", "system": "sys",
                        "secretRef": {"name": "sio"}}}]),
            ),
            want: vec![
                ("/spec/volumes/0/iscsi/iscsiInterface", json!("default")),
                ("/spec/volumes/1/rbd/pool", json!("rbd")),
                ("/spec/volumes/1/rbd/user", json!("admin")),
                ("/spec/volumes/1/rbd/keyring", json!("/etc/ceph/keyring")),
                ("/spec/volumes/2/azureDisk/cachingMode", json!("ReadWrite")),
                ("/spec/volumes/2/azureDisk/kind", json!("Shared")),
                ("/spec/volumes/2/azureDisk/fsType", json!("ext4")),
                ("/spec/volumes/2/azureDisk/readOnly", json!(false)),
                ("/spec/volumes/3/scaleIO/storageMode", json!("ThinProvisioned")),
                ("/spec/volumes/3/scaleIO/fsType", json!("xfs")),
            ],
        },
    ])
    .await;
}

#[tokio::test]
async fn services_are_defaulted_as_upstream() {
    const SVC: &str = "/api/v1/namespaces/default/services";
    let svc = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    run(vec![
        Case {
            what: "a port without protocol or targetPort",
            path: SVC,
            body: svc(
                "plain",
                json!({"selector": {"app": "a"}, "ports": [{"port": 80}]}),
            ),
            want: vec![
                ("/spec/type", json!("ClusterIP")),
                ("/spec/sessionAffinity", json!("None")),
                ("/spec/internalTrafficPolicy", json!("Cluster")),
                ("/spec/externalTrafficPolicy", Value::Null),
                (
                    "/spec/ports/0",
                    json!({"port": 80, "protocol": "TCP", "targetPort": 80}),
                ),
                ("/status", json!({"loadBalancer": {}})),
            ],
        },
        Case {
            what: "a load balancer with sticky sessions",
            path: SVC,
            body: svc(
                "lb",
                json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                    "ports": [{"port": 443, "targetPort": "https", "protocol": "TCP"}]}),
            ),
            want: vec![
                ("/spec/externalTrafficPolicy", json!("Cluster")),
                ("/spec/internalTrafficPolicy", json!("Cluster")),
                ("/spec/allocateLoadBalancerNodePorts", json!(true)),
                (
                    "/spec/sessionAffinityConfig",
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                ),
                ("/spec/ports/0/targetPort", json!("https")),
            ],
        },
        Case {
            what: "an ExternalName service",
            path: SVC,
            body: svc(
                "ext",
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
            ),
            want: vec![
                ("/spec/sessionAffinity", json!("None")),
                ("/spec/internalTrafficPolicy", Value::Null),
                ("/spec/externalTrafficPolicy", Value::Null),
            ],
        },
    ])
    .await;
}

#[tokio::test]
async fn other_core_kinds_are_defaulted_as_upstream() {
    run(vec![
        Case {
            what: "a namespace",
            path: "/api/v1/namespaces",
            body: json!({"metadata": {"name": "fresh"}}),
            want: vec![
                ("/spec/finalizers", json!(["kubernetes"])),
                ("/status/phase", json!("Active")),
                (
                    "/metadata/labels/kubernetes.io~1metadata.name",
                    json!("fresh"),
                ),
            ],
        },
        Case {
            what: "a secret",
            path: "/api/v1/namespaces/default/secrets",
            body: json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}),
            want: vec![
                ("/type", json!("Opaque")),
                ("/data", json!({"a": "Yg=="})),
                ("/stringData", Value::Null),
            ],
        },
        Case {
            what: "a persistent volume",
            path: "/api/v1/persistentvolumes",
            body: json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv"}}}),
            want: vec![
                ("/spec/persistentVolumeReclaimPolicy", json!("Retain")),
                ("/spec/volumeMode", json!("Filesystem")),
                ("/spec/hostPath/type", json!("")),
                ("/status/phase", json!("Pending")),
            ],
        },
        Case {
            what: "a node stating only its capacity",
            path: "/api/v1/nodes",
            body: json!({"metadata": {"name": "n1"},
                "status": {"capacity": {"cpu": "2", "pods": "110"}}}),
            want: vec![("/status/allocatable", json!({"cpu": "2", "pods": "110"}))],
        },
        Case {
            what: "a persistent volume claim",
            path: "/api/v1/namespaces/default/persistentvolumeclaims",
            body: json!({"metadata": {"name": "pvc"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
            want: vec![
                ("/spec/volumeMode", json!("Filesystem")),
                ("/status/phase", json!("Pending")),
            ],
        },
        Case {
            what: "a replication controller",
            path: "/api/v1/namespaces/default/replicationcontrollers",
            body: json!({"metadata": {"name": "rc"}, "spec": {"template": {
                "metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}),
            want: vec![
                ("/spec/replicas", json!(1)),
                ("/spec/selector", json!({"app": "rc"})),
                ("/metadata/labels", json!({"app": "rc"})),
                ("/spec/template/spec/restartPolicy", json!("Always")),
                (
                    "/spec/template/spec/containers/0/imagePullPolicy",
                    json!("IfNotPresent"),
                ),
            ],
        },
        Case {
            what: "endpoints",
            path: "/api/v1/namespaces/default/endpoints",
            body: json!({"metadata": {"name": "ep"}, "subsets": [{
                "addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}),
            want: vec![("/subsets/0/ports/0", json!({"port": 80, "protocol": "TCP"}))],
        },
        Case {
            what: "a limit range",
            path: "/api/v1/namespaces/default/limitranges",
            body: json!({"metadata": {"name": "lr"}, "spec": {"limits": [
                {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
                {"type": "Pod", "max": {"cpu": "4"}}]}}),
            want: vec![
                ("/spec/limits/0/default", json!({"cpu": "2"})),
                (
                    "/spec/limits/0/defaultRequest",
                    json!({"cpu": "2", "memory": "64Mi"}),
                ),
                ("/spec/limits/1/default", Value::Null),
            ],
        },
    ])
    .await;
}

#[tokio::test]
async fn a_pod_stored_before_a_default_existed_still_takes_label_patches() {
    use skiff_store::Store;

    let s = crate::harness::TestServer::new().await;
    let body = pod(
        "old",
        json!({"containers": [{"name": "c", "image": "busybox:1.36",
            "resources": {"limits": {"cpu": "1"}}}]}),
    );
    let (code, created) = s.post(PODS, body).await;
    assert_eq!(code, http::StatusCode::CREATED, "{created}");
    // As an older server wrote it: no resizePolicy.
    let key = "/registry/core/pods/default/old";
    let stored = s.store.get(key).await.unwrap().expect("stored pod");
    let mut old: Value = serde_json::from_slice(&stored.value).unwrap();
    old["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("resizePolicy");
    s.store
        .update(key, serde_json::to_vec(&old).unwrap().into(), None)
        .await
        .unwrap();
    let (code, patched) = s
        .merge_patch(
            &format!("{PODS}/old"),
            json!({"metadata": {"labels": {"touched": "yes"}}}),
        )
        .await;
    assert_eq!(code, http::StatusCode::OK, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["touched"], "yes");
}
