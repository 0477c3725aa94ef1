//! The warnings upstream gives about a pod or pod template that is valid but
//! likely wrong (upstream's `GetWarningsForPod`): deprecated node labels in
//! selectors and affinity, null label selectors that match nothing,
//! annotations that stopped working, duplicate pull secrets and host
//! aliases, volume items whose paths overlap, template AppArmor annotations
//! without the field, fractional byte quantities, environment variables
//! that hide an earlier one, ports declared twice, and a negative grace
//! period. kubectl
//! prints each as `Warning: …`; the object is stored as sent.
//!
//! Paths are upstream's: `spec.…` for a pod, `spec.template.spec.…` (the
//! template's own path) for a workload.

use serde_json::Value;

use crate::object::indexed;

/// Node labels that have a newer name, and what upstream says of each.
const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    (
        "beta.kubernetes.io/arch",
        "deprecated since v1.14; use \"kubernetes.io/arch\" instead",
    ),
    (
        "beta.kubernetes.io/os",
        "deprecated since v1.14; use \"kubernetes.io/os\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead",
    ),
];

/// Annotations that no longer do anything.
const DEPRECATED_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        "non-functional in v1.16+; use the \"priorityClassName\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
];

/// Volume sources upstream removed, and since when (named in the path as
/// upstream names them: its Go field for `storageos`).
const REMOVED_VOLUMES: &[(&str, &str)] = &[
    (
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    ("gitRepo", "deprecated in v1.11"),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("flocker", "deprecated in v1.22, non-functional in v1.25+"),
    ("storageos", "deprecated in v1.22, non-functional in v1.25+"),
    ("quobyte", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
];

const NULL_SELECTOR: &str = "a null labelSelector results in matching no pod";

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

fn deprecated_node_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(label, _)| *label == key)
        .map(|(_, message)| *message)
}

/// The warnings for a pod or template (`{"metadata": …, "spec": …}`)
/// whose path is `prefix` (empty for a pod itself).
pub(crate) fn warnings(template: &Value, prefix: &str) -> Vec<String> {
    let at = |rest: &str| {
        if prefix.is_empty() {
            rest.to_owned()
        } else {
            format!("{prefix}.{rest}")
        }
    };
    let spec = &template["spec"];
    let annotations = &template["metadata"]["annotations"];
    let mut out = Vec::new();

    for key in spec["nodeSelector"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if let Some(message) = deprecated_node_label(key) {
            out.push(format!(
                "{}: {message}",
                at(&format!("spec.nodeSelector[{key}]"))
            ));
        }
    }
    let node_affinity = &spec["affinity"]["nodeAffinity"];
    let required = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
    for (i, term) in indexed(
        &node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
    ) {
        node_term(
            term,
            &at(&format!("{required}.nodeSelectorTerms[{i}]")),
            &mut out,
        );
    }
    let preferred = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
    for (i, term) in indexed(&node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]) {
        node_term(
            &term["preference"],
            &at(&format!("{preferred}[{i}].preference")),
            &mut out,
        );
    }
    for (i, constraint) in indexed(&spec["topologySpreadConstraints"]) {
        let here = at(&format!("spec.topologySpreadConstraints[{i}]"));
        let key = constraint["topologyKey"].as_str().unwrap_or("");
        if let Some(message) = deprecated_node_label(key) {
            out.push(format!("{here}.topologyKey: {key} is {message}"));
        }
        if constraint["labelSelector"].is_null() {
            out.push(format!("{here}.labelSelector: {NULL_SELECTOR}"));
        }
    }

    for (key, message) in DEPRECATED_ANNOTATIONS {
        if annotations.get(*key).is_some() {
            out.push(format!(
                "{}: {message}",
                at(&format!("metadata.annotations[{key}]"))
            ));
        }
    }

    for (i, volume) in indexed(&spec["volumes"]) {
        let here = at(&format!("spec.volumes[{i}]"));
        removed_volume_sources(volume, &here, &mut out);
        let template = &volume["ephemeral"]["volumeClaimTemplate"];
        if template.is_object() {
            let path = format!("{here}.ephemeral.volumeClaimTemplate.spec");
            claim_spec(&template["spec"], &path, &mut out);
        }
    }
    overlapping_paths(&spec["volumes"], &mut out);

    duplicates(
        &spec["hostAliases"],
        "ip",
        &at("spec.hostAliases"),
        &mut out,
    );
    duplicates(
        &spec["imagePullSecrets"],
        "name",
        &at("spec.imagePullSecrets"),
        &mut out,
    );
    for (i, secret) in indexed(&spec["imagePullSecrets"]) {
        if secret["name"].as_str().unwrap_or("").is_empty() {
            out.push(format!(
                "{}: invalid empty name \"\"",
                at(&format!("spec.imagePullSecrets[{i}].name"))
            ));
        }
    }

    for resource in ["memory", "ephemeral-storage"] {
        fractional_bytes(&spec["overhead"], resource, &at("spec.overhead"), &mut out);
    }
    if spec["securityContext"]["seccompProfile"].is_null()
        && annotations.get(SECCOMP_POD_ANNOTATION).is_some()
    {
        out.push(format!(
            "{}: non-functional in v1.27+; use the \"seccompProfile\" field instead",
            at(&format!("metadata.annotations[{SECCOMP_POD_ANNOTATION}]"))
        ));
    }

    let containers = containers_with_paths(spec, &at("spec"));
    for (container, here) in &containers {
        let name = container["name"].as_str().unwrap_or("");
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION}{name}");
        if container["securityContext"]["seccompProfile"].is_null()
            && annotations.get(&key).is_some()
        {
            out.push(format!(
                "{}: non-functional in v1.27+; use the \"seccompProfile\" field instead",
                at(&format!("metadata.annotations[{key}]"))
            ));
        }
        // A pod's own are settled on create (`kinds/pods/apparmor.rs`).
        let apparmor = format!("{APPARMOR_ANNOTATION}{name}");
        if !prefix.is_empty()
            && spec["securityContext"]["appArmorProfile"].is_null()
            && container["securityContext"]["appArmorProfile"].is_null()
            && annotations.get(&apparmor).is_some()
        {
            out.push(format!(
                "{}: deprecated since v1.30; use the \"appArmorProfile\" field instead",
                at(&format!("metadata.annotations[{apparmor}]"))
            ));
        }
        for list in ["limits", "requests"] {
            for resource in ["memory", "ephemeral-storage"] {
                fractional_bytes(
                    &container["resources"][list],
                    resource,
                    &format!("{here}.resources.{list}"),
                    &mut out,
                );
            }
        }
        hidden_env(container, here, &mut out);
    }
    ports(&containers, &mut out);

    if spec["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|s| s < 0)
    {
        out.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            at("spec.terminationGracePeriodSeconds")
        ));
    }

    for kind in ["podAffinity", "podAntiAffinity"] {
        let affinity = &spec["affinity"][kind];
        let required =
            format!("spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in indexed(&affinity["requiredDuringSchedulingIgnoredDuringExecution"]) {
            if term["labelSelector"].is_null() {
                out.push(format!(
                    "{}: {NULL_SELECTOR}",
                    at(&format!("{required}[{i}].labelSelector"))
                ));
            }
        }
        let preferred =
            format!("spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in indexed(&affinity["preferredDuringSchedulingIgnoredDuringExecution"]) {
            if term["podAffinityTerm"]["labelSelector"].is_null() {
                out.push(format!(
                    "{}: {NULL_SELECTOR}",
                    at(&format!("{preferred}[{i}].podAffinityTerm.labelSelector"))
                ));
            }
        }
    }
    out
}

/// A claim spec's fractional storage request or limit (upstream's
/// GetWarningsForPersistentVolumeClaimSpec): for claims, and for the claim
/// templates of a pod's ephemeral volumes.
pub(crate) fn claim_spec(spec: &Value, here: &str, out: &mut Vec<String>) {
    for list in ["requests", "limits"] {
        fractional_bytes(
            &spec["resources"][list],
            "storage",
            &format!("{here}.resources.{list}"),
            out,
        );
    }
}

/// The volume sources upstream removed, found in `source` (a pod volume or
/// a PersistentVolume's spec), each warned of at `here.<source>`.
pub(crate) fn removed_volume_sources(source: &Value, here: &str, out: &mut Vec<String>) {
    for (field, message) in REMOVED_VOLUMES {
        if source[*field].is_object() {
            let named = if *field == "storageos" {
                "storageOS"
            } else {
                field
            };
            out.push(format!("{here}.{named}: {message}"));
        }
    }
}

/// Volume items that would land on the same file or inside one another's
/// path (upstream's warningsForOverlappingVirtualPaths), per volume and,
/// for a projected volume, across its sources. A source that projects no
/// paths is skipped; upstream re-checks the previous source's paths there,
/// warning of an overlap that is not one.
fn overlapping_paths(volumes: &Value, out: &mut Vec<String>) {
    use crate::go_format::go_quote;
    let paths = |items: &Value| -> Option<Vec<String>> {
        items.as_array().map(|items| {
            items
                .iter()
                .map(|item| item["path"].as_str().unwrap_or("").to_owned())
                .collect()
        })
    };
    let named = |object: &Value, field: &str| go_quote(object[field].as_str().unwrap_or(""));
    for (_, volume) in indexed(volumes) {
        let name = go_quote(volume["name"].as_str().unwrap_or(""));
        let head = |what: String| format!("volume {name} ({what}): overlapping paths");
        if let Some(found) = paths(&volume["configMap"]["items"]) {
            let what = format!("ConfigMap {}", named(&volume["configMap"], "name"));
            overlaps(&found, &head(what), out);
        }
        if let Some(found) = paths(&volume["secret"]["items"]) {
            let what = format!("Secret {}", named(&volume["secret"], "secretName"));
            overlaps(&found, &head(what), out);
        }
        if let Some(found) = paths(&volume["downwardAPI"]["items"]) {
            overlaps(&found, &head("DownwardAPI".into()), out);
        }
        if !volume["projected"].is_object() {
            continue;
        }
        let mut earlier: Vec<String> = Vec::new();
        for (_, source) in indexed(&volume["projected"]["sources"]) {
            if source
                .as_object()
                .is_none_or(|s| s.values().all(Value::is_null))
            {
                out.push(format!("volume {name} (Projected) has no sources provided"));
                continue;
            }
            let bundle = &source["clusterTrustBundle"];
            let (found, what) = if let Some(found) = paths(&source["configMap"]["items"]) {
                (
                    found,
                    format!(
                        "Projected ConfigMap {}",
                        named(&source["configMap"], "name")
                    ),
                )
            } else if let Some(found) = paths(&source["secret"]["items"]) {
                (
                    found,
                    format!("Projected Secret {}", named(&source["secret"], "name")),
                )
            } else if let Some(found) = paths(&source["downwardAPI"]["items"]) {
                (found, "Projected DownwardAPI".to_owned())
            } else if source["serviceAccountToken"].is_object() {
                let path = source["serviceAccountToken"]["path"].as_str().unwrap_or("");
                (
                    vec![path.to_owned()],
                    "Projected ServiceAccountToken".to_owned(),
                )
            } else if bundle.is_object() {
                let by = if bundle["name"].is_string() {
                    "name"
                } else {
                    "signerName"
                };
                let path = bundle["path"].as_str().unwrap_or("");
                (
                    vec![path.to_owned()],
                    format!("Projected ClusterTrustBundle {}", named(bundle, by)),
                )
            } else {
                continue;
            };
            if found.is_empty() {
                continue;
            }
            let head = head(what);
            overlaps(&found, &head, out);
            let mut unique: Vec<String> = Vec::new();
            for path in found {
                if !unique.contains(&path) {
                    unique.push(path);
                }
            }
            let mut ordered: Vec<String> = unique.iter().chain(&earlier).cloned().collect();
            ordered.sort();
            overlaps(&ordered, &head, out);
            for path in unique {
                if !earlier.contains(&path) {
                    earlier.push(path);
                }
            }
        }
    }
}

/// Each path that overlaps one before it: the same, or either a prefix of
/// the other with a separator added (upstream's test, quirks included:
/// `a` and `ab` overlap).
fn overlaps(paths: &[String], head: &str, out: &mut Vec<String>) {
    use crate::go_format::go_quote;
    let mut seen: Vec<&str> = Vec::new();
    for path in paths {
        let path = path.trim_end_matches('/');
        let collision = seen.iter().find_map(|item| {
            let hit = !item.is_empty()
                && !path.is_empty()
                && (*item == path
                    || format!("{item}/").starts_with(path)
                    || format!("{path}/").starts_with(item));
            hit.then_some(*item)
        });
        if let Some(item) = collision {
            out.push(format!(
                "{head}: {} with {}",
                go_quote(path),
                go_quote(item)
            ));
        }
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
}

/// A node selector term's deprecated label keys (upstream's
/// GetWarningsForNodeSelectorTerm, shared with PersistentVolumes).
pub(crate) fn node_term(term: &Value, here: &str, out: &mut Vec<String>) {
    for (i, expression) in indexed(&term["matchExpressions"]) {
        let key = expression["key"].as_str().unwrap_or("");
        if let Some(message) = deprecated_node_label(key) {
            out.push(format!(
                "{here}.matchExpressions[{i}].key: {key} is {message}"
            ));
        }
    }
}

/// Items of `list` whose `field` repeats an earlier one's.
fn duplicates(list: &Value, field: &str, here: &str, out: &mut Vec<String>) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, item) in indexed(list) {
        let value = item[field].as_str().unwrap_or("");
        if seen.contains(&value) {
            out.push(format!("{here}[{i}].{field}: duplicate {field} {value:?}"));
        } else {
            seen.push(value);
        }
    }
}

/// A byte quantity with a fraction of a byte.
fn fractional_bytes(map: &Value, resource: &str, here: &str, out: &mut Vec<String>) {
    if let Some(amount) = super::quantity(&map[resource]).filter(|a| a.milli() % 1000 != 0) {
        out.push(format!(
            "{here}[{resource}]: fractional byte value \"{amount}\" is invalid, must be an integer"
        ));
    }
}

/// Every container (init, regular, ephemeral, in upstream's visiting
/// order) with its path.
fn containers_with_paths<'a>(spec: &'a Value, here: &str) -> Vec<(&'a Value, String)> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            indexed(&spec[*list]).map(move |(i, c)| (c, format!("{here}.{list}[{i}]")))
        })
        .collect()
}

/// An environment variable defined again in a way `kubectl apply` may
/// drop: from a source, as a reference to itself, or without using the
/// earlier value.
fn hidden_env(container: &Value, here: &str, out: &mut Vec<String>) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, var) in indexed(&container["env"]) {
        let name = var["name"].as_str().unwrap_or("");
        if !seen.contains(&name) {
            seen.push(name);
            continue;
        }
        let reference = format!("$({name})");
        let value = var["value"].as_str().unwrap_or("");
        if !var["valueFrom"].is_null() || value == reference || !value.contains(&reference) {
            out.push(format!(
                "{here}.env[{i}]: hides previous definition of {name:?}, which may be dropped when using apply"
            ));
        }
    }
}

/// Container ports declared twice (same number and protocol) across the
/// pod, and host IPs without a host port.
fn ports(containers: &[(&Value, String)], out: &mut Vec<String>) {
    // (container port, protocol, host IP, host port, path) of ports seen.
    let mut seen: Vec<(i64, &str, &str, i64, String)> = Vec::new();
    for (container, here) in containers {
        for (i, port) in indexed(&container["ports"]) {
            let field = format!("{here}.ports[{i}]");
            let number = port["containerPort"].as_i64().unwrap_or(0);
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            let host_ip = port["hostIP"].as_str().unwrap_or("");
            let host_port = port["hostPort"].as_i64().unwrap_or(0);
            if !host_ip.is_empty() && host_port == 0 {
                out.push(format!(
                    "{field}: hostIP set without hostPort: {}",
                    go_port(port, number, protocol, host_ip, host_port)
                ));
            }
            for (n, p, other_ip, other_port, other) in &seen {
                if (*n, *p) != (number, protocol) {
                    continue;
                }
                let (a, b) = (host_ip.is_empty(), other_ip.is_empty());
                if host_ip == *other_ip && host_port == *other_port {
                    out.push(format!("{field}: duplicate port definition with {other}"));
                } else if host_port == 0 || *other_port == 0 {
                    out.push(format!("{field}: overlapping port definition with {other}"));
                } else if host_port == *other_port && (a || b) && !(a && b) {
                    out.push(format!(
                        "{field}: dangerously ambiguous port definition with {other}"
                    ));
                }
            }
            seen.push((number, protocol, host_ip, host_port, field));
        }
    }
}

/// A container port as Go's `%+v` prints upstream's struct.
fn go_port(port: &Value, number: i64, protocol: &str, host_ip: &str, host_port: i64) -> String {
    let name = port["name"].as_str().unwrap_or("");
    format!(
        "{{Name:{name} HostPort:{host_port} ContainerPort:{number} Protocol:{protocol} HostIP:{host_ip}}}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_likely_mistake_is_warned_of_at_its_path() {
        let pod = json!({"metadata": {"annotations": {
                "scheduler.alpha.kubernetes.io/critical-pod": ""}},
            "spec": {
                "nodeSelector": {"beta.kubernetes.io/os": "linux"},
                "terminationGracePeriodSeconds": -5,
                "imagePullSecrets": [{"name": "a"}, {"name": "a"}],
                "topologySpreadConstraints": [{"maxSkew": 1,
                    "topologyKey": "failure-domain.beta.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule"}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"memory": "0.5"}},
                     "env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"},
                             {"name": "X", "value": "$(X):3"}],
                     "ports": [{"containerPort": 80}]},
                    {"name": "b", "ports": [{"containerPort": 80}]}]}});
        assert_eq!(
            warnings(&pod, ""),
            [
                "spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use \"kubernetes.io/os\" instead",
                "spec.topologySpreadConstraints[0].topologyKey: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
                "spec.topologySpreadConstraints[0].labelSelector: a null labelSelector results in matching no pod",
                "metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the \"priorityClassName\" field instead",
                "spec.imagePullSecrets[1].name: duplicate name \"a\"",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"500m\" is invalid, must be an integer",
                "spec.containers[0].env[1]: hides previous definition of \"X\", which may be dropped when using apply",
                "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]",
                "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
            ]
        );
    }

    #[test]
    fn volume_items_whose_paths_overlap_are_warned_of() {
        let pod = json!({"spec": {"volumes": [
            {"name": "cm", "configMap": {"name": "conf", "items": [
                {"key": "a", "path": "app"}, {"key": "b", "path": "app/extra"}, {"key": "c", "path": "other"}]}},
            {"name": "sec", "secret": {"secretName": "s", "items": [
                {"key": "a", "path": "x/"}, {"key": "b", "path": "x"}]}},
            {"name": "all", "projected": {"sources": [
                {"configMap": {"name": "one", "items": [{"key": "k", "path": "token"}]}},
                {"serviceAccountToken": {"path": "token"}},
                {}]}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "resources": {"requests": {"storage": "0.5"}}}}}}],
            "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            warnings(&pod, "")[1..],
            [
                "volume \"cm\" (ConfigMap \"conf\"): overlapping paths: \"app/extra\" with \"app\"",
                "volume \"sec\" (Secret \"s\"): overlapping paths: \"x\" with \"x\"",
                "volume \"all\" (Projected ServiceAccountToken): overlapping paths: \"token\" with \"token\"",
                "volume \"all\" (Projected) has no sources provided",
            ]
        );
        assert_eq!(
            warnings(&pod, "")[..1],
            [
                "spec.volumes[3].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]: fractional byte value \"500m\" is invalid, must be an integer"
            ]
        );
    }

    #[test]
    fn a_templates_apparmor_annotation_without_the_field_is_warned_of() {
        let template = json!({"metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/c": "runtime/default",
                "container.apparmor.security.beta.kubernetes.io/d": "runtime/default"}},
            "spec": {"containers": [{"name": "c", "image": "i"},
                {"name": "d", "image": "i", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]}});
        assert_eq!(
            warnings(&template, "spec.template"),
            [
                "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated since v1.30; use the \"appArmorProfile\" field instead"
            ]
        );
        assert!(
            warnings(&template, "").is_empty(),
            "a pod's are settled on create"
        );
    }

    #[test]
    fn a_template_is_warned_of_under_its_path_and_a_plain_one_not_at_all() {
        let template = json!({"spec": {"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
            "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostIP": "10.0.0.1"}]}]}});
        assert_eq!(
            warnings(&template, "spec.template"),
            [
                "spec.template.spec.containers[0].ports[0]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:80 Protocol:TCP HostIP:10.0.0.1}",
                "spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
            ]
        );
        let plain = json!({"spec": {"containers": [{"name": "a", "image": "i",
            "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}]}]}});
        assert!(warnings(&plain, "").is_empty());
    }
}
