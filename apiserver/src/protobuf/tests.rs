//! Objects encoded with prost (and bytes captured from kubectl) decode to the
//! JSON a client would have sent.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;
use skiff_common::labels::from_pairs as labels;

use super::*;

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn decode<M: Message>(api_version: &str, kind: &str, message: &M) -> Value {
    decode_object(&Envelope::encode(
        api_version,
        kind,
        message.encode_to_vec(),
    ))
    .unwrap()
}

/// Metadata as Go writes it: every non-pointer field present, zero when unset.
fn meta_named(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

#[test]
fn configmap_with_text_and_binary_data() {
    let cm = core::ConfigMap {
        metadata: Some(meta_named("settings")),
        data: labels(&[("a", "b"), ("empty", "")]),
        binary_data: BTreeMap::from([("blob".to_string(), vec![0u8, 1, 2, 255])]),
        immutable: Some(false),
    };
    assert_eq!(
        decode("v1", "ConfigMap", &cm),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"a": "b", "empty": ""},
            "binaryData": {"blob": "AAEC/w=="},
            "immutable": false
        })
    );
}

#[test]
fn secret_bytes_become_base64() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            namespace: s("prod"),
            ..meta_named("creds")
        }),
        data: BTreeMap::from([("p".to_string(), b"q\n".to_vec())]),
        string_data: labels(&[("user", "admin")]),
        r#type: s("Opaque"),
        immutable: None,
    };
    assert_eq!(
        decode("v1", "Secret", &secret),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "prod"},
            "data": {"p": "cQo="},
            "stringData": {"user": "admin"},
            "type": "Opaque"
        })
    );
}

#[test]
fn namespace_drops_go_zero_values() {
    let ns = core::Namespace {
        metadata: Some(meta_named("team-a")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: s(""),
            ..Default::default()
        }),
    };
    assert_eq!(
        decode("v1", "Namespace", &ns),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a"},
            "spec": {},
            "status": {}
        })
    );
}

fn container() -> core::Container {
    core::Container {
        name: s("web"),
        image: s("busybox:1.36"),
        command: vec!["sh".into(), "-c".into(), "httpd -f".into()],
        ports: vec![core::ContainerPort {
            name: s(""),
            host_port: Some(0),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([
                ("cpu".to_string(), quantity("500m")),
                ("memory".to_string(), quantity("128Mi")),
            ]),
            requests: BTreeMap::from([("cpu".to_string(), quantity("0.1"))]),
            claims: vec![],
        }),
        working_dir: s(""),
        termination_message_path: s(""),
        image_pull_policy: s(""),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        ..Default::default()
    }
}

#[test]
fn deployment_with_a_full_pod_template() {
    let deploy = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            labels: labels(&[("app", "web")]),
            ..meta_named("web")
        }),
        spec: Some(apps::DeploymentSpec {
            // A pointer field: zero replicas is a request, not "unset".
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels(&[("app", "web")]),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: labels(&[("app", "web")]),
                    ..meta_named("")
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container()],
                    restart_policy: s(""),
                    dns_policy: s(""),
                    service_account_name: s(""),
                    host_network: Some(false),
                    termination_grace_period_seconds: Some(0),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: s(""),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("25%"),
                    }),
                }),
            }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            ..Default::default()
        }),
    };
    assert_eq!(
        decode("apps/v1", "Deployment", &deploy),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "web",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", "httpd -f"],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {
                                "limits": {"cpu": "500m", "memory": "128Mi"},
                                "requests": {"cpu": "0.1"}
                            }
                        }],
                        "terminationGracePeriodSeconds": 0
                    }
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                }
            },
            "status": {}
        })
    );
}

#[test]
fn service_with_cluster_ips_and_int_or_string_target_port() {
    let svc = core::Service {
        metadata: Some(meta_named("api")),
        spec: Some(core::ServiceSpec {
            ports: vec![
                core::ServicePort {
                    name: s("http"),
                    protocol: s("TCP"),
                    port: Some(80),
                    target_port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: s(""),
                    }),
                    node_port: Some(0),
                    app_protocol: None,
                },
                core::ServicePort {
                    name: s("unset-target"),
                    protocol: s("UDP"),
                    port: Some(53),
                    // Go's zero IntOrString: the server defaults it to the port.
                    target_port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(0),
                        str_val: s(""),
                    }),
                    node_port: Some(0),
                    app_protocol: None,
                },
                core::ServicePort {
                    name: s("metrics"),
                    protocol: s("TCP"),
                    port: Some(9090),
                    target_port: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("metrics"),
                    }),
                    node_port: Some(0),
                    app_protocol: None,
                },
            ],
            selector: labels(&[("app", "api")]),
            cluster_ip: s("10.43.0.10"),
            cluster_ips: vec!["10.43.0.10".into(), "fd00::10".into()],
            ip_families: vec!["IPv4".into(), "IPv6".into()],
            r#type: s("ClusterIP"),
            external_ips: vec![],
            session_affinity: s(""),
            load_balancer_ip: s(""),
            external_name: s(""),
            publish_not_ready_addresses: Some(false),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    };
    assert_eq!(
        decode("v1", "Service", &svc),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "api"},
            "spec": {
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "unset-target", "protocol": "UDP", "port": 53},
                    {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"}
                ],
                "selector": {"app": "api"},
                "clusterIP": "10.43.0.10",
                "clusterIPs": ["10.43.0.10", "fd00::10"],
                "ipFamilies": ["IPv4", "IPv6"],
                "type": "ClusterIP"
            },
            "status": {}
        })
    );
}

#[test]
fn pod_with_env_volumes_times_and_pointer_zeros() {
    let pod = core::Pod {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_767_323_045),
                nanos: Some(0),
            }),
            labels: labels(&[("x", "y")]),
            owner_references: vec![meta::OwnerReference {
                api_version: s("apps/v1"),
                kind: s("ReplicaSet"),
                name: s("web-1"),
                uid: s("1234"),
                controller: Some(true),
                block_owner_deletion: None,
            }],
            ..meta_named("p")
        }),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                env: vec![
                    core::EnvVar {
                        name: s("A"),
                        value: s("B"),
                        value_from: None,
                    },
                    core::EnvVar {
                        name: s("EMPTY"),
                        value: s(""),
                        value_from: None,
                    },
                    core::EnvVar {
                        name: s("FROM"),
                        value: s(""),
                        value_from: Some(core::EnvVarSource {
                            config_map_key_ref: Some(core::ConfigMapKeySelector {
                                local_object_reference: Some(core::LocalObjectReference {
                                    name: s("settings"),
                                }),
                                key: s("a"),
                                optional: None,
                            }),
                            ..Default::default()
                        }),
                    },
                ],
                volume_mounts: vec![core::VolumeMount {
                    name: s("cfg"),
                    read_only: Some(true),
                    mount_path: s("/etc/cfg"),
                    sub_path: s(""),
                    ..Default::default()
                }],
                ..container()
            }],
            volumes: vec![
                core::Volume {
                    name: s("cfg"),
                    volume_source: Some(core::VolumeSource {
                        config_map: Some(core::ConfigMapVolumeSource {
                            local_object_reference: Some(core::LocalObjectReference {
                                name: s("settings"),
                            }),
                            items: vec![],
                            default_mode: Some(0o644),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                },
                core::Volume {
                    name: s("scratch"),
                    volume_source: Some(core::VolumeSource {
                        empty_dir: Some(core::EmptyDirVolumeSource {
                            medium: s(""),
                            size_limit: Some(quantity("1Gi")),
                        }),
                        ..Default::default()
                    }),
                },
            ],
            security_context: Some(core::PodSecurityContext {
                run_as_user: Some(0),
                ..Default::default()
            }),
            tolerations: vec![core::Toleration {
                key: s("node.kubernetes.io/not-ready"),
                operator: s("Exists"),
                value: s(""),
                effect: s("NoExecute"),
                toleration_seconds: Some(300),
            }],
            ..Default::default()
        }),
        status: None,
    };
    let json = decode("v1", "Pod", &pod);
    assert_eq!(
        json["metadata"]["creationTimestamp"],
        "2026-01-02T03:04:05Z"
    );
    assert_eq!(
        json["metadata"]["ownerReferences"],
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "1234", "controller": true}])
    );
    let c = &json["spec"]["containers"][0];
    assert_eq!(
        c["env"],
        json!([
            {"name": "A", "value": "B"},
            {"name": "EMPTY"},
            {"name": "FROM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}}
        ])
    );
    assert_eq!(
        c["volumeMounts"],
        json!([{"name": "cfg", "readOnly": true, "mountPath": "/etc/cfg"}])
    );
    assert_eq!(
        json["spec"]["volumes"],
        json!([
            {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
        ])
    );
    assert_eq!(json["spec"]["securityContext"], json!({"runAsUser": 0}));
    assert_eq!(
        json["spec"]["tolerations"][0]["tolerationSeconds"],
        json!(300)
    );
    assert!(json.get("status").is_none());
}

#[test]
fn micro_times_durations_and_embedded_json() {
    use k8s_pb::api::events::v1 as events;
    let event = events::Event {
        metadata: Some(meta_named("e1")),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_767_323_045),
            nanos: Some(123_456_789),
        }),
        reason: s("Started"),
        ..Default::default()
    };
    let json = decode("events.k8s.io/v1", "Event", &event);
    assert_eq!(json["eventTime"], "2026-01-02T03:04:05.123456Z");
    assert_eq!(json["reason"], "Started");

    let revision = apps::ControllerRevision {
        metadata: Some(meta_named("rev")),
        data: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension {
            raw: Some(br#"{"spec":{"replicas":3}}"#.to_vec()),
        }),
        revision: Some(2),
    };
    let json = decode("apps/v1", "ControllerRevision", &revision);
    assert_eq!(json["data"], json!({"spec": {"replicas": 3}}));
    assert_eq!(json["revision"], 2);
}

#[test]
fn crd_schemas_keep_their_json_names_and_unions() {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let props = ext::JsonSchemaProps {
        r#type: s("object"),
        properties: BTreeMap::from([(
            "size".to_string(),
            ext::JsonSchemaProps {
                r#type: s("integer"),
                default: Some(ext::Json {
                    raw: Some(b"3".to_vec()),
                }),
                ..Default::default()
            },
        )]),
        additional_properties: Some(Box::new(ext::JsonSchemaPropsOrBool {
            allows: Some(false),
            schema: None,
        })),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    };
    let crd = ext::CustomResourceDefinition {
        metadata: Some(meta_named("widgets.example.com")),
        spec: Some(ext::CustomResourceDefinitionSpec {
            group: s("example.com"),
            names: Some(ext::CustomResourceDefinitionNames {
                plural: s("widgets"),
                kind: s("Widget"),
                ..Default::default()
            }),
            scope: s("Namespaced"),
            versions: vec![ext::CustomResourceDefinitionVersion {
                name: s("v1"),
                served: Some(true),
                storage: Some(true),
                schema: Some(ext::CustomResourceValidation {
                    open_apiv3_schema: Some(props),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let json = decode("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd);
    let schema = &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_eq!(
        schema,
        &json!({
            "type": "object",
            "properties": {"size": {"type": "integer", "default": 3}},
            "additionalProperties": false,
            "x-kubernetes-preserve-unknown-fields": true
        })
    );
    assert_eq!(json["spec"]["versions"][0]["served"], true);
}

/// `kubectl create deployment d0 --image=busybox --replicas=0` as kubectl
/// 1.33 sends it (from `-v=9`).
const KUBECTL_DEPLOYMENT: &str = "\
6b 38 73 00 0a 15 0a 07 61 70 70 73 2f 76 31 12 0a 44 65 70 6c 6f 79 6d 65 6e 74 12 ab 01 0a 1d \
0a 02 64 30 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 5a 09 0a 03 61 70 70 12 02 64 30 12 7c 08 \
00 12 0b 0a 09 0a 03 61 70 70 12 02 64 30 1a 63 0a 1b 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 \
42 00 5a 09 0a 03 61 70 70 12 02 64 30 12 44 12 26 0a 07 62 75 73 79 62 6f 78 12 07 62 75 73 79 \
62 6f 78 2a 00 42 00 6a 00 72 00 80 01 00 88 01 00 90 01 00 a2 01 00 1a 00 32 00 42 00 4a 00 52 \
00 58 00 60 00 68 00 82 01 00 8a 01 00 9a 01 00 c2 01 00 22 02 0a 00 28 00 38 00 1a 0c 08 00 10 \
00 18 00 20 00 28 00 38 00 1a 00 22 00";

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

#[test]
fn decodes_what_kubectl_sends() {
    let json = decode_object(&hex(KUBECTL_DEPLOYMENT)).unwrap();
    assert_eq!(
        json,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d0", "labels": {"app": "d0"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "d0"}},
                "template": {
                    "metadata": {"labels": {"app": "d0"}},
                    "spec": {"containers": [{"name": "busybox", "image": "busybox", "resources": {}}]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn unknown_kinds_and_broken_messages_are_errors() {
    let unknown = Envelope::encode("v1", "Gadget", vec![]);
    assert!(matches!(
        decode_object(&unknown),
        Err(ProtobufError::UnknownKind { .. })
    ));
    // Field 1 (metadata) claims 100 bytes that are not there.
    let truncated = Envelope::encode("v1", "ConfigMap", vec![0x0a, 100, 1]);
    assert!(matches!(
        decode_object(&truncated),
        Err(ProtobufError::Message { .. })
    ));
    // Embedded JSON that is not JSON.
    let revision = apps::ControllerRevision {
        metadata: Some(meta_named("rev")),
        data: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension {
            raw: Some(b"{not json".to_vec()),
        }),
        revision: Some(1),
    };
    let body = Envelope::encode("apps/v1", "ControllerRevision", revision.encode_to_vec());
    assert!(matches!(
        decode_object(&body),
        Err(ProtobufError::Convert { .. })
    ));
}

/// Bodies kubectl 1.33 sent (from `-v=9`) for
/// `create service clusterip s --tcp=80:8080`,
/// `create priorityclass pc --value=0 --description=zero`,
/// `create ingress ing --rule="foo.com/bar=svc1:8080,tls=my-cert"` and
/// `create job j --image=busybox`: Go's zero fields are left out, zeros the
/// user asked for stay.
#[test]
fn decodes_kubectl_generator_output() {
    let cases = [
        (
            "6b 38 73 00 0a 0d 0a 02 76 31 12 07 53 65 72 76 69 63 65 12 63 0a 1b 0a 01 73 12 00 1a 00 22 00
             2a 00 32 00 38 00 42 00 5a 08 0a 03 61 70 70 12 01 73 12 40 0a 1b 0a 07 38 30 2d 38 30 38 30 12
             03 54 43 50 18 50 22 07 08 00 10 90 3f 1a 00 28 00 12 08 0a 03 61 70 70 12 01 73 1a 00 22 09 43
             6c 75 73 74 65 72 49 50 3a 00 42 00 52 00 5a 00 60 00 68 00 1a 02 0a 00 1a 00 22 00",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "s", "labels": {"app": "s"}},
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "s"},
                    "type": "ClusterIP"
                },
                "status": {"loadBalancer": {}}
            }),
        ),
        (
            "6b 38 73 00 0a 25 0a 14 73 63 68 65 64 75 6c 69 6e 67 2e 6b 38 73 2e 69 6f 2f 76 31 12 0d 50 72
             69 6f 72 69 74 79 43 6c 61 73 73 12 34 0a 12 0a 02 70 63 12 00 1a 00 22 00 2a 00 32 00 38 00 42
             00 10 00 18 00 22 04 7a 65 72 6f 2a 14 50 72 65 65 6d 70 74 4c 6f 77 65 72 50 72 69 6f 72 69 74
             79 1a 00 22 00",
            json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "pc"},
                "value": 0,
                "description": "zero",
                "preemptionPolicy": "PreemptLowerPriority"
            }),
        ),
        (
            "6b 38 73 00 0a 1f 0a 14 6e 65 74 77 6f 72 6b 69 6e 67 2e 6b 38 73 2e 69 6f 2f 76 31 12 07 49 6e
             67 72 65 73 73 12 5e 0a 13 0a 03 69 6e 67 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 43 12 12
             0a 07 66 6f 6f 2e 63 6f 6d 12 07 6d 79 2d 63 65 72 74 1a 2d 0a 07 66 6f 6f 2e 63 6f 6d 12 22 0a
             20 0a 1e 0a 04 2f 62 61 72 12 0f 22 0d 0a 04 73 76 63 31 12 05 0a 00 10 90 3f 1a 05 45 78 61 63
             74 1a 02 0a 00 1a 00 22 00",
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": "ing"},
                "spec": {
                    "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}],
                    "rules": [{"host": "foo.com", "http": {"paths": [{
                        "path": "/bar",
                        "pathType": "Exact",
                        "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}
                    }]}}]
                },
                "status": {"loadBalancer": {}}
            }),
        ),
        (
            "6b 38 73 00 0a 0f 0a 08 62 61 74 63 68 2f 76 31 12 03 4a 6f 62 12 78 0a 11 0a 01 6a 12 00 1a 00
             22 00 2a 00 32 00 38 00 42 00 12 59 32 57 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00
             12 43 12 20 0a 01 6a 12 07 62 75 73 79 62 6f 78 2a 00 42 00 6a 00 72 00 80 01 00 88 01 00 90 01
             00 a2 01 00 1a 05 4e 65 76 65 72 32 00 42 00 4a 00 52 00 58 00 60 00 68 00 82 01 00 8a 01 00 9a
             01 00 c2 01 00 1a 08 20 00 28 00 30 00 3a 00 1a 00 22 00",
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "j"},
                "spec": {"template": {
                    "metadata": {},
                    "spec": {
                        "containers": [{"name": "j", "image": "busybox", "resources": {}}],
                        "restartPolicy": "Never"
                    }
                }},
                "status": {}
            }),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(decode_object(&hex(body)).unwrap(), expected);
    }
}

#[test]
fn eviction_keeps_an_immediate_grace_period() {
    use k8s_pb::api::policy::v1::Eviction;
    let eviction = Eviction {
        metadata: Some(meta::ObjectMeta {
            namespace: s("default"),
            ..meta_named("p")
        }),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            propagation_policy: s(""),
            dry_run: vec!["All".into()],
            ..Default::default()
        }),
    };
    assert_eq!(
        decode("policy/v1", "Eviction", &eviction),
        json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 0, "dryRun": ["All"]}
        })
    );
    // A bare DeleteOptions body decodes under whichever group version it names.
    let options = meta::DeleteOptions {
        propagation_policy: s("Foreground"),
        ..Default::default()
    };
    assert_eq!(
        decode("apps/v1", "DeleteOptions", &options),
        json!({"apiVersion": "apps/v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"})
    );
}

/// A ControllerRevision whose data is another one's envelope, `depth` deep.
fn nested_revisions(depth: usize) -> Vec<u8> {
    let mut body = Envelope::encode("v1", "ConfigMap", Vec::new());
    for _ in 0..depth {
        let revision = apps::ControllerRevision {
            data: Some(k8s_pb::apimachinery::pkg::runtime::RawExtension { raw: Some(body) }),
            ..Default::default()
        };
        body = Envelope::encode("apps/v1", "ControllerRevision", revision.encode_to_vec());
    }
    body
}

/// Objects embedded in objects (RawExtension) are decoded only so deep: a
/// body of a few hundred kilobytes could otherwise nest them thousands deep
/// and take gigabytes (or the serving thread's stack) to decode.
#[test]
fn deeply_nested_embedded_objects_are_refused() {
    let shallow = decode_object(&nested_revisions(MAX_NESTING)).unwrap();
    assert_eq!(shallow["data"]["data"]["kind"], "ControllerRevision");
    assert_eq!(
        shallow.pointer("/data/data/data/data/kind"),
        Some(&json!("ConfigMap"))
    );
    let deep = nested_revisions(MAX_NESTING + 1);
    let error = decode_object(&deep).unwrap_err();
    assert!(error.to_string().contains("nested more than"), "{error}");
    // As a request body: a 400 Status, not a crash.
    let far_too_deep = nested_revisions(4_000);
    assert!(far_too_deep.len() < crate::status::MAX_BODY_BYTES);
    let refused = std::thread::Builder::new()
        .stack_size(2 << 20) // a tokio worker's stack
        .spawn(move || crate::fuzzing::decode_body(Some(MEDIA_TYPE), &far_too_deep).unwrap_err())
        .unwrap()
        .join()
        .expect("decoding did not overflow the stack");
    assert_eq!(refused.code(), http::StatusCode::BAD_REQUEST);
}
