//! The other groups: networking, rbac, storage, autoscaling (v1 and v2),
//! scheduling, policy, discovery, coordination and admissionregistration.

use serde_json::{Value, json};

use super::{Case, run};

#[tokio::test]
async fn networking_kinds_are_defaulted_as_upstream() {
    const NETPOL: &str = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    run(vec![
        Case {
            what: "a policy with ingress rules only",
            path: NETPOL,
            body: json!({"metadata": {"name": "in"}, "spec": {"podSelector": {},
                "ingress": [{"ports": [{"port": 80}]}]}}),
            want: vec![
                ("/spec/policyTypes", json!(["Ingress"])),
                (
                    "/spec/ingress/0/ports/0",
                    json!({"port": 80, "protocol": "TCP"}),
                ),
            ],
        },
        Case {
            what: "a policy with egress rules",
            path: NETPOL,
            body: json!({"metadata": {"name": "out"}, "spec": {"podSelector": {},
                "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]}}),
            want: vec![
                ("/spec/policyTypes", json!(["Ingress", "Egress"])),
                ("/spec/egress/0/ports/0/protocol", json!("UDP")),
            ],
        },
        Case {
            what: "a policy naming its types",
            path: NETPOL,
            body: json!({"metadata": {"name": "deny-out"}, "spec": {"podSelector": {},
                "policyTypes": ["Egress"]}}),
            want: vec![("/spec/policyTypes", json!(["Egress"]))],
        },
        Case {
            what: "an ingress class with parameters",
            path: "/apis/networking.k8s.io/v1/ingressclasses",
            body: json!({"metadata": {"name": "ic"}, "spec": {"controller": "example.com/ic",
                "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p"}}}),
            want: vec![("/spec/parameters/scope", json!("Cluster"))],
        },
        Case {
            what: "an ingress (pathType is required, nothing defaulted)",
            path: "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            body: json!({"metadata": {"name": "ing"}, "spec": {"rules": [{"http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
            want: vec![
                ("/spec/rules/0/http/paths/0/pathType", json!("Prefix")),
                ("/spec/ingressClassName", Value::Null),
            ],
        },
    ])
    .await;
}

#[tokio::test]
async fn rbac_storage_scheduling_and_autoscaling_are_defaulted_as_upstream() {
    run(vec![
        Case {
            what: "role binding subjects",
            path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            body: json!({"metadata": {"name": "rb"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                    {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}),
            want: vec![
                ("/subjects/0/apiGroup", json!("rbac.authorization.k8s.io")),
                ("/subjects/1/apiGroup", json!("rbac.authorization.k8s.io")),
                ("/subjects/2/apiGroup", Value::Null),
            ],
        },
        Case {
            what: "a storage class",
            path: "/apis/storage.k8s.io/v1/storageclasses",
            body: json!({"metadata": {"name": "sc"}, "provisioner": "example.com/disk"}),
            want: vec![
                ("/reclaimPolicy", json!("Delete")),
                ("/volumeBindingMode", json!("Immediate")),
            ],
        },
        Case {
            what: "a CSI driver",
            path: "/apis/storage.k8s.io/v1/csidrivers",
            body: json!({"metadata": {"name": "disk.example.com"}, "spec": {}}),
            want: vec![(
                "/spec",
                json!({"attachRequired": true, "podInfoOnMount": false,
                    "storageCapacity": false, "fsGroupPolicy": "ReadWriteOnceWithFSType",
                    "volumeLifecycleModes": ["Persistent"], "requiresRepublish": false,
                    "seLinuxMount": false}),
            )],
        },
        Case {
            what: "a priority class",
            path: "/apis/scheduling.k8s.io/v1/priorityclasses",
            body: json!({"metadata": {"name": "high"}, "value": 1000}),
            want: vec![
                ("/preemptionPolicy", json!("PreemptLowerPriority")),
                ("/globalDefault", Value::Null),
            ],
        },
        Case {
            what: "an autoscaling/v2 autoscaler with no metrics and a partial behavior",
            path: "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            body: json!({"metadata": {"name": "hpa2"}, "spec": {"maxReplicas": 5,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
            want: vec![
                ("/spec/minReplicas", json!(1)),
                (
                    "/spec/metrics",
                    json!([{"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80}}}]),
                ),
                (
                    "/spec/behavior",
                    json!({
                        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                        "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}),
                ),
            ],
        },
        Case {
            what: "an autoscaling/v2 autoscaler without a behavior",
            path: "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
            body: json!({"metadata": {"name": "hpa2-plain"}, "spec": {"maxReplicas": 5,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
            want: vec![("/spec/behavior", Value::Null)],
        },
        Case {
            what: "an autoscaling/v1 autoscaler",
            path: "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
            body: json!({"metadata": {"name": "hpa1"}, "spec": {"maxReplicas": 5,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
            want: vec![
                ("/spec/minReplicas", json!(1)),
                ("/spec/targetCPUUtilizationPercentage", Value::Null),
            ],
        },
    ])
    .await;
}

#[tokio::test]
async fn discovery_and_admission_kinds_are_defaulted_as_upstream() {
    run(vec![
        Case {
            what: "an endpoint slice",
            path: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            body: json!({"metadata": {"name": "es"}, "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]}),
            want: vec![(
                "/ports/0",
                json!({"name": "", "port": 80, "protocol": "TCP"}),
            )],
        },
        Case {
            what: "a pod disruption budget (nothing defaulted)",
            path: "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            body: json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1,
                "selector": {"matchLabels": {"app": "w"}}}}),
            want: vec![
                ("/spec/minAvailable", json!(1)),
                ("/spec/unhealthyPodEvictionPolicy", Value::Null),
            ],
        },
        Case {
            what: "a validating webhook",
            path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            body: json!({"metadata": {"name": "vwc"}, "webhooks": [{"name": "v.example.com",
                "clientConfig": {"url": "https://example.com/v"},
                "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["pods"]}]}]}),
            want: vec![
                ("/webhooks/0/failurePolicy", json!("Fail")),
                ("/webhooks/0/matchPolicy", json!("Equivalent")),
                ("/webhooks/0/namespaceSelector", json!({})),
                ("/webhooks/0/objectSelector", json!({})),
                ("/webhooks/0/timeoutSeconds", json!(10)),
                ("/webhooks/0/rules/0/scope", json!("*")),
                ("/webhooks/0/reinvocationPolicy", Value::Null),
            ],
        },
        Case {
            what: "a validating admission policy",
            path: "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            body: json!({"metadata": {"name": "vap"}, "spec": {
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE"],
                    "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                "validations": [{"expression": "true"}]}}),
            want: vec![
                ("/spec/failurePolicy", json!("Fail")),
                ("/spec/matchConstraints/matchPolicy", json!("Equivalent")),
                ("/spec/matchConstraints/namespaceSelector", json!({})),
                ("/spec/matchConstraints/objectSelector", json!({})),
                ("/spec/matchConstraints/resourceRules/0/scope", json!("*")),
            ],
        },
        Case {
            what: "a mutating webhook",
            path: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            body: json!({"metadata": {"name": "mwc"}, "webhooks": [{"name": "m.example.com",
                "clientConfig": {"url": "https://example.com/m"},
                "admissionReviewVersions": ["v1"], "sideEffects": "None"}]}),
            want: vec![
                ("/webhooks/0/failurePolicy", json!("Fail")),
                ("/webhooks/0/reinvocationPolicy", json!("Never")),
                ("/webhooks/0/timeoutSeconds", json!(10)),
            ],
        },
    ])
    .await;
}
