//! Every built-in kind through kubectl's own command flows: the kinds come
//! from the server's discovery (each group's preferred version), each gets a
//! representative manifest, and all of them go through `apply -f`, `get -o
//! yaml`, `describe`, a merge `patch` of a label, `replace` of the fetched
//! objects (what `kubectl edit` sends) and `delete`, batched into one
//! kubectl call per step. Any kubectl error or panic fails the sweep, and so
//! does a served kind without a manifest here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine;
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::{Value, json};
use skiff_testkit::json::str_array;

use super::support::{Server, eventually};

/// Where namespaced objects of the sweep live.
const NS: &str = "sweep";

/// What kubectl prints when it crashes or trips over a response.
const CRASH_MARKERS: &[&str] = &["panic", "invalid memory address", "unexpected error"];

/// The group/version/kind of every kind the server serves that kubectl
/// can create from a manifest, at each group's preferred version.
fn creatable_kinds(server: &Server) -> BTreeSet<String> {
    let mut versions = vec!["v1".to_string()];
    let groups: Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/apis"])).unwrap();
    for group in groups["groups"].as_array().unwrap() {
        versions.push(
            group["preferredVersion"]["groupVersion"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let mut kinds = BTreeSet::new();
    for gv in versions {
        let path = if gv == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{gv}")
        };
        let list: Value =
            serde_json::from_str(&server.kubectl_ok(&["get", "--raw", &path])).unwrap();
        for resource in list["resources"].as_array().unwrap() {
            let name = resource["name"].as_str().unwrap();
            let verbs = str_array(&resource["verbs"]);
            // Subresources are reached through their parent's kind.
            if name.contains('/') || !verbs.contains(&"create") {
                continue;
            }
            // The access and token reviews are create-only questions: the
            // answer is returned, nothing is stored to get, describe,
            // patch or delete afterwards.
            if verbs == ["create"] {
                continue;
            }
            kinds.insert(format!("{gv}/{}", resource["kind"].as_str().unwrap()));
        }
    }
    kinds
}

/// A PEM certificate request for the CSR manifest.
fn csr_request() -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "sweeper");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// A representative manifest per group/version/kind.
fn manifests() -> BTreeMap<&'static str, Value> {
    let labels = json!({"app": "sweep"});
    let pod_spec = json!({"containers": [{"name": "c", "image": "busybox:1.36",
        "command": ["sleep", "3600"]}]});
    let template = json!({"metadata": {"labels": labels}, "spec": pod_spec});
    let selector = json!({"matchLabels": labels});
    let hook = |name: &str| {
        // Matches nothing the sweep writes, and is ignored when it cannot
        // be reached, so it never stands in the way.
        json!({"name": name, "clientConfig": {"url": "https://127.0.0.1:1/hook"},
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
            "rules": [{"operations": ["CREATE"], "apiGroups": ["sweep.example.com"],
                "apiVersions": ["v1"], "resources": ["nothing"]}]})
    };
    let ns = |kind: &str, api: &str, name: &str, rest: Value| {
        let mut object = json!({"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": NS}});
        object
            .as_object_mut()
            .unwrap()
            .extend(rest.as_object().unwrap().clone());
        object
    };
    let cluster = |kind: &str, api: &str, name: &str, rest: Value| {
        let mut object = json!({"apiVersion": api, "kind": kind, "metadata": {"name": name}});
        object
            .as_object_mut()
            .unwrap()
            .extend(rest.as_object().unwrap().clone());
        object
    };
    let now = "2026-01-01T00:00:00.000000Z";
    BTreeMap::from([
        (
            "v1/ConfigMap",
            ns("ConfigMap", "v1", "cm", json!({"data": {"k": "v"}})),
        ),
        (
            "v1/Endpoints",
            ns(
                "Endpoints",
                "v1",
                "manual",
                json!({"subsets": [
            {"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
            ),
        ),
        (
            "v1/Event",
            ns(
                "Event",
                "v1",
                "ev",
                json!({"involvedObject": {"kind": "Pod",
            "name": "pod", "namespace": NS}, "reason": "Swept", "message": "swept",
            "type": "Normal"}),
            ),
        ),
        (
            "v1/LimitRange",
            ns(
                "LimitRange",
                "v1",
                "lr",
                json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "4"}}]}}),
            ),
        ),
        (
            "v1/Namespace",
            cluster("Namespace", "v1", "sweep-other", json!({})),
        ),
        (
            "v1/Node",
            cluster(
                "Node",
                "v1",
                "sweep-node",
                json!({"spec": {"unschedulable": true}}),
            ),
        ),
        (
            "v1/PersistentVolumeClaim",
            ns(
                "PersistentVolumeClaim",
                "v1",
                "pvc",
                json!({"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            ),
        ),
        (
            "v1/PersistentVolume",
            cluster(
                "PersistentVolume",
                "v1",
                "sweep-pv",
                json!({"spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/sweep"}}}),
            ),
        ),
        ("v1/Pod", ns("Pod", "v1", "pod", json!({"spec": pod_spec}))),
        (
            "v1/PodTemplate",
            ns("PodTemplate", "v1", "pt", json!({"template": template})),
        ),
        (
            "v1/ReplicationController",
            ns(
                "ReplicationController",
                "v1",
                "rc",
                json!({"spec": {
            "replicas": 0, "template": template}}),
            ),
        ),
        (
            "v1/ResourceQuota",
            ns(
                "ResourceQuota",
                "v1",
                "quota",
                json!({"spec": {
            "hard": {"pods": "100"}}}),
            ),
        ),
        (
            "v1/Secret",
            ns("Secret", "v1", "secret", json!({"stringData": {"k": "v"}})),
        ),
        (
            "v1/ServiceAccount",
            ns("ServiceAccount", "v1", "sa", json!({})),
        ),
        // Selector-less, so the Endpoints named after it are the sweep's
        // own (the endpoints controller removes Endpoints of no Service and
        // rewrites those of a Service with a selector).
        (
            "v1/Service",
            ns(
                "Service",
                "v1",
                "manual",
                json!({"spec": {"ports": [{"port": 80}]}}),
            ),
        ),
        (
            "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration",
            cluster(
                "MutatingWebhookConfiguration",
                "admissionregistration.k8s.io/v1",
                "sweep-mutating",
                json!({"webhooks": [hook("m.sweep.example.com")]}),
            ),
        ),
        (
            "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
            cluster(
                "ValidatingWebhookConfiguration",
                "admissionregistration.k8s.io/v1",
                "sweep-validating",
                json!({"webhooks": [hook("v.sweep.example.com")]}),
            ),
        ),
        (
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
            cluster(
                "ValidatingAdmissionPolicy",
                "admissionregistration.k8s.io/v1",
                "sweep-policy",
                json!({"spec": {"matchConstraints": {"resourceRules": [{
                    "operations": ["CREATE"], "apiGroups": ["sweep.example.com"],
                    "apiVersions": ["v1"], "resources": ["nothing"]}]},
                    "validations": [{"expression": "true"}]}}),
            ),
        ),
        (
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
            cluster(
                "ValidatingAdmissionPolicyBinding",
                "admissionregistration.k8s.io/v1",
                "sweep-policy-binding",
                json!({"spec": {"policyName": "sweep-policy", "validationActions": ["Deny"]}}),
            ),
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1/PriorityLevelConfiguration",
            cluster(
                "PriorityLevelConfiguration",
                "flowcontrol.apiserver.k8s.io/v1",
                "sweep-level",
                json!({"spec": {"type": "Limited", "limited": {
                    "nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}}),
            ),
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1/FlowSchema",
            cluster(
                "FlowSchema",
                "flowcontrol.apiserver.k8s.io/v1",
                "sweep-schema",
                // Matches only a user and a path nothing uses.
                json!({"spec": {"priorityLevelConfiguration": {"name": "sweep-level"},
                    "matchingPrecedence": 9000, "rules": [{
                        "subjects": [{"kind": "User", "user": {"name": "sweeper"}}],
                        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/sweep"]}]}]}}),
            ),
        ),
        (
            "apiextensions.k8s.io/v1/CustomResourceDefinition",
            cluster(
                "CustomResourceDefinition",
                "apiextensions.k8s.io/v1",
                "widgets.sweep.example.com",
                json!({"spec": {"group": "sweep.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
            ),
        ),
        (
            "apiregistration.k8s.io/v1/APIService",
            // A Service nobody runs: unavailable, so never in discovery.
            cluster(
                "APIService",
                "apiregistration.k8s.io/v1",
                "v1.sweep-agg.example.com",
                json!({"spec": {"group": "sweep-agg.example.com", "version": "v1",
                    "groupPriorityMinimum": 1000, "versionPriority": 15,
                    "insecureSkipTLSVerify": true,
                    "service": {"namespace": NS, "name": "sweep-api", "port": 443}}}),
            ),
        ),
        (
            "apps/v1/ControllerRevision",
            ns(
                "ControllerRevision",
                "apps/v1",
                "rev",
                json!({"revision": 1, "data": {"spec": {}}}),
            ),
        ),
        (
            "apps/v1/DaemonSet",
            ns(
                "DaemonSet",
                "apps/v1",
                "ds",
                json!({"spec": {
            "selector": selector, "template": template}}),
            ),
        ),
        (
            "apps/v1/Deployment",
            ns(
                "Deployment",
                "apps/v1",
                "deploy",
                json!({"spec": {
            "replicas": 0, "selector": selector, "template": template}}),
            ),
        ),
        (
            "apps/v1/ReplicaSet",
            ns(
                "ReplicaSet",
                "apps/v1",
                "rs",
                json!({"spec": {
            "replicas": 0, "selector": selector, "template": template}}),
            ),
        ),
        (
            "apps/v1/StatefulSet",
            ns(
                "StatefulSet",
                "apps/v1",
                "sts",
                json!({"spec": {
            "replicas": 0, "serviceName": "manual", "selector": selector, "template": template}}),
            ),
        ),
        (
            "autoscaling/v2/HorizontalPodAutoscaler",
            ns(
                "HorizontalPodAutoscaler",
                "autoscaling/v2",
                "hpa",
                json!({"spec": {"maxReplicas": 3, "scaleTargetRef": {"apiVersion": "apps/v1",
                "kind": "Deployment", "name": "deploy"}}}),
            ),
        ),
        (
            "batch/v1/CronJob",
            ns(
                "CronJob",
                "batch/v1",
                "cj",
                json!({"spec": {
            "schedule": "*/5 * * * *", "suspend": true, "jobTemplate": {"spec": {
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": pod_spec["containers"]}}}}}}),
            ),
        ),
        (
            "batch/v1/Job",
            ns(
                "Job",
                "batch/v1",
                "job",
                json!({"spec": {"suspend": true,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": pod_spec["containers"]}}}}),
            ),
        ),
        (
            "certificates.k8s.io/v1/CertificateSigningRequest",
            cluster(
                "CertificateSigningRequest",
                "certificates.k8s.io/v1",
                "sweep-csr",
                json!({"spec": {"request": csr_request(), "signerName": "example.com/sweep",
                "usages": ["client auth"]}}),
            ),
        ),
        (
            "coordination.k8s.io/v1/Lease",
            ns(
                "Lease",
                "coordination.k8s.io/v1",
                "lease",
                json!({"spec": {"holderIdentity": "sweeper", "leaseDurationSeconds": 30}}),
            ),
        ),
        (
            "discovery.k8s.io/v1/EndpointSlice",
            ns(
                "EndpointSlice",
                "discovery.k8s.io/v1",
                "slice",
                json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}],
                "ports": [{"port": 80}]}),
            ),
        ),
        (
            "events.k8s.io/v1/Event",
            ns(
                "Event",
                "events.k8s.io/v1",
                "ev2",
                json!({
            "eventTime": now, "reportingController": "example.com/sweeper",
            "reportingInstance": "sweeper-1", "action": "Sweep", "reason": "Swept",
            "type": "Normal", "note": "swept",
            "regarding": {"kind": "Pod", "name": "pod", "namespace": NS}}),
            ),
        ),
        (
            "networking.k8s.io/v1/IngressClass",
            cluster(
                "IngressClass",
                "networking.k8s.io/v1",
                "sweep-class",
                json!({"spec": {"controller": "example.com/ingress"}}),
            ),
        ),
        (
            "networking.k8s.io/v1/Ingress",
            ns(
                "Ingress",
                "networking.k8s.io/v1",
                "ing",
                json!({
            "spec": {"ingressClassName": "sweep-class", "rules": [{"host": "sweep.example.com",
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                    "service": {"name": "manual", "port": {"number": 80}}}}]}}]}}),
            ),
        ),
        (
            "networking.k8s.io/v1/IPAddress",
            cluster(
                "IPAddress",
                "networking.k8s.io/v1",
                "10.250.0.10",
                json!({"spec": {"parentRef": {"group": "", "resource": "services",
                "namespace": NS, "name": "manual"}}}),
            ),
        ),
        (
            "networking.k8s.io/v1/NetworkPolicy",
            ns(
                "NetworkPolicy",
                "networking.k8s.io/v1",
                "netpol",
                json!({"spec": {"podSelector": {"matchLabels": labels},
                "ingress": [{"ports": [{"port": 80}]}]}}),
            ),
        ),
        (
            "networking.k8s.io/v1/ServiceCIDR",
            cluster(
                "ServiceCIDR",
                "networking.k8s.io/v1",
                "sweep-cidr",
                json!({"spec": {"cidrs": ["10.250.0.0/24"]}}),
            ),
        ),
        (
            "policy/v1/PodDisruptionBudget",
            ns(
                "PodDisruptionBudget",
                "policy/v1",
                "pdb",
                json!({
            "spec": {"minAvailable": 1, "selector": selector}}),
            ),
        ),
        (
            "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
            cluster(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                "sweep-crb",
                json!({"roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sweep-cr"},
                "subjects": [{"kind": "User", "name": "sweeper"}]}),
            ),
        ),
        (
            "rbac.authorization.k8s.io/v1/ClusterRole",
            cluster(
                "ClusterRole",
                "rbac.authorization.k8s.io/v1",
                "sweep-cr",
                json!({"rules": [{"apiGroups": [""],
                "resources": ["pods"], "verbs": ["get"]}]}),
            ),
        ),
        (
            "rbac.authorization.k8s.io/v1/RoleBinding",
            ns(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                "rb",
                json!({"roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": NS}]}),
            ),
        ),
        (
            "rbac.authorization.k8s.io/v1/Role",
            ns(
                "Role",
                "rbac.authorization.k8s.io/v1",
                "role",
                json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get"]}]}),
            ),
        ),
        (
            "node.k8s.io/v1/RuntimeClass",
            cluster(
                "RuntimeClass",
                "node.k8s.io/v1",
                "sweep-runtime",
                json!({"handler": "runc", "overhead": {"podFixed": {"cpu": "10m"}}}),
            ),
        ),
        (
            "scheduling.k8s.io/v1/PriorityClass",
            cluster(
                "PriorityClass",
                "scheduling.k8s.io/v1",
                "sweep-priority",
                json!({"value": 100, "description": "swept"}),
            ),
        ),
        (
            "storage.k8s.io/v1/CSIDriver",
            cluster(
                "CSIDriver",
                "storage.k8s.io/v1",
                "sweep.csi.example.com",
                json!({"spec": {}}),
            ),
        ),
        (
            "storage.k8s.io/v1/CSINode",
            cluster(
                "CSINode",
                "storage.k8s.io/v1",
                "sweep-node",
                json!({"spec": {"drivers": [{"name": "sweep.csi.example.com", "nodeID": "n1"}]}}),
            ),
        ),
        (
            "storage.k8s.io/v1/CSIStorageCapacity",
            ns(
                "CSIStorageCapacity",
                "storage.k8s.io/v1",
                "capacity",
                json!({"storageClassName": "sweep-sc", "capacity": "10Gi"}),
            ),
        ),
        (
            "storage.k8s.io/v1/StorageClass",
            cluster(
                "StorageClass",
                "storage.k8s.io/v1",
                "sweep-sc",
                json!({"provisioner": "sweep.csi.example.com"}),
            ),
        ),
        (
            "storage.k8s.io/v1/VolumeAttachment",
            cluster(
                "VolumeAttachment",
                "storage.k8s.io/v1",
                "sweep-attachment",
                json!({"spec": {"attacher": "sweep.csi.example.com",
                "nodeName": "sweep-node", "source": {"persistentVolumeName": "sweep-pv"}}}),
            ),
        ),
    ])
}

/// Runs kubectl (optionally with `input`), fails on an error or a crash,
/// and returns its standard output.
fn run(server: &Server, args: &[&str], input: Option<&str>) -> String {
    let out = match input {
        Some(input) => server.kubectl_stdin(args, input),
        None => server.kubectl(args),
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{stderr}\n{stdout}"
    );
    for marker in CRASH_MARKERS {
        assert!(
            !stdout.contains(marker) && !stderr.contains(marker),
            "kubectl {args:?} printed {marker:?}:\n{stderr}\n{stdout}"
        );
    }
    stdout
}

#[test]
fn every_served_kind_through_kubectl() {
    let server = Server::start();
    let manifests = manifests();
    let served = creatable_kinds(&server);
    let missing: Vec<&String> = served
        .iter()
        .filter(|k| !manifests.contains_key(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "served kinds without a sweep manifest: {missing:?}"
    );
    let stale: Vec<&&str> = manifests.keys().filter(|k| !served.contains(**k)).collect();
    assert!(
        stale.is_empty(),
        "manifests for kinds not served: {stale:?}"
    );

    run(&server, &["create", "namespace", NS], None);
    // Pods need their namespace's default service account.
    eventually(
        Duration::from_secs(30),
        "the default service account",
        || {
            server
                .kubectl(&["get", "serviceaccount", "default", "-n", NS])
                .status
                .success()
                .then_some(())
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.yaml");
    let docs: Vec<String> = manifests.values().map(|m| m.to_string()).collect();
    std::fs::write(&file, docs.join("\n---\n")).unwrap();
    let file = file.to_str().unwrap();
    let count = manifests.len();

    let applied = run(&server, &["apply", "-f", file], None);
    assert_eq!(applied.lines().count(), count, "{applied}");

    let yaml = run(&server, &["get", "-f", file, "-o", "yaml"], None);
    assert_eq!(yaml.matches("\n  kind: ").count(), count, "{yaml}");

    let described = run(&server, &["describe", "-f", file], None);
    let described_names: BTreeSet<&str> = described
        .lines()
        .filter(|l| l.starts_with("Name:"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let undescribed: Vec<&str> = manifests
        .values()
        .filter_map(|m| m["metadata"]["name"].as_str())
        .filter(|n| !described_names.contains(n))
        .collect();
    assert!(
        undescribed.is_empty(),
        "not described: {undescribed:?}\n{described}"
    );

    let patched = run(
        &server,
        &[
            "patch",
            "-f",
            file,
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"swept":"yes"}}}"#,
        ],
        None,
    );
    assert_eq!(patched.lines().count(), count, "{patched}");
    let labelled = run(
        &server,
        &["get", "-f", file, "-o", "name", "-l", "swept=yes"],
        None,
    );
    assert_eq!(labelled.lines().count(), count, "{labelled}");

    // `kubectl edit` writes back the object it fetched: a replace carrying
    // the fetched resourceVersion. Controllers write some of these objects'
    // status meanwhile (the scheduler a pod's, for one), which turns that
    // replace into a 409 as upstream's would; fetch again then.
    let mut attempts = 0;
    let replaced = loop {
        attempts += 1;
        let fetched = run(&server, &["get", "-f", file, "-o", "json"], None);
        let out = server.kubectl_stdin(&["replace", "-f", "-"], &fetched);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        for marker in CRASH_MARKERS {
            assert!(
                !stderr.contains(marker),
                "replace printed {marker:?}:\n{stderr}"
            );
        }
        if out.status.success() {
            break stdout;
        }
        let only_conflicts = stderr
            .lines()
            .all(|l| l.contains("(Conflict)") || l.trim().is_empty());
        assert!(
            only_conflicts && attempts < 5,
            "kubectl replace failed:\n{stderr}\n{stdout}"
        );
    };
    assert_eq!(replaced.lines().count(), count, "{replaced}");

    run(&server, &["delete", "-f", file, "--wait=false"], None);
    let left = eventually(Duration::from_secs(45), "every swept object gone", || {
        let left = run(
            &server,
            &["get", "-f", file, "-o", "name", "--ignore-not-found"],
            None,
        );
        left.trim().is_empty().then_some(left)
    });
    assert!(left.trim().is_empty());
}
