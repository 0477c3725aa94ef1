//! Validation of pods, pod templates inside workloads, and services.

use serde_json::Value;

use super::names::{
    NameRule, is_dns1123_label, unique_label, validate_label_value, validate_name,
    validate_qualified_name,
};
use skiff_common::amount::Amount;

use super::resource_names::{self, CONTAINER};

use crate::selectors::LabelSelector;
use crate::status::FieldError;

const POD_UPDATE_RULE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub(crate) fn pod(object: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    pod_spec(&object["spec"], "spec", errors);
    let Some(old) = old else {
        if object["spec"]["ephemeralContainers"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
        {
            errors.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            ));
        }
        return;
    };
    let gated = super::pod_placement::is_gated(&old["spec"]);
    if gated {
        super::pod_placement::gated_update(&old["spec"], &object["spec"], errors);
    }
    if mutable_view(&old["spec"], &object["spec"], gated)
        != mutable_view(&object["spec"], &object["spec"], gated)
    {
        errors.push(FieldError::forbidden("spec", POD_UPDATE_RULE));
    }
    only_removed_gates(&old["spec"], &object["spec"], errors);
    ephemeral_containers(&old["spec"], &object["spec"], errors);
}

/// A pod's scheduling gates may be removed (what lets it be scheduled),
/// never added, as upstream rules.
fn only_removed_gates(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let names = |spec: &Value| -> Vec<String> {
        spec["schedulingGates"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| g["name"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let before = names(old);
    for (i, gate) in names(new).iter().enumerate() {
        if !before.contains(gate) {
            errors.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{gate}'"),
            ));
        }
    }
}

/// Fields an ephemeral container may not set: it is never restarted,
/// probed, reached through a port or given its own resources.
const NOT_FOR_EPHEMERAL: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resizePolicy",
    "restartPolicy",
];

/// Ephemeral containers only come (through `pods/ephemeralcontainers`):
/// one added stays as it was, and a new one is named uniquely in the pod,
/// has an image, sets none of [`NOT_FOR_EPHEMERAL`] nor resources, and
/// targets (if at all) one of the pod's containers.
fn ephemeral_containers(old: &Value, spec: &Value, errors: &mut Vec<FieldError>) {
    let list = |spec: &Value, field: &str| -> Vec<Value> {
        spec[field].as_array().cloned().unwrap_or_default()
    };
    let (before, now) = (
        list(old, "ephemeralContainers"),
        list(spec, "ephemeralContainers"),
    );
    let named = |c: &Value, name: &str| c["name"].as_str() == Some(name);
    for was in &before {
        let name = was["name"].as_str().unwrap_or_default();
        match now.iter().position(|c| named(c, name)) {
            None => errors.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                format!("existing ephemeral containers {name:?} may not be removed"),
            )),
            Some(i) if now[i] != *was => errors.push(FieldError::forbidden(
                format!("spec.ephemeralContainers[{i}]"),
                format!("existing ephemeral containers {name:?} may not be changed"),
            )),
            Some(_) => {}
        }
    }
    let targets: Vec<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|field| list(spec, field))
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    let mut taken = targets.clone();
    for (i, c) in now.iter().enumerate() {
        let at = format!("spec.ephemeralContainers[{i}]");
        let name = c["name"].as_str().unwrap_or_default();
        if before.iter().any(|b| named(b, name)) {
            taken.push(name.to_string());
            continue;
        }
        if name.is_empty() {
            errors.push(FieldError::required(format!("{at}.name"), ""));
        } else if !is_dns1123_label(name) {
            errors.extend(validate_name(NameRule::Label, name, &format!("{at}.name")));
        } else if taken.iter().any(|t| t == name) {
            errors.push(FieldError::duplicate(format!("{at}.name"), name));
        }
        taken.push(name.to_string());
        if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
            errors.push(FieldError::required(format!("{at}.image"), ""));
        }
        super::pod_volumes::ephemeral_mounts(c, &volumes, &at, errors);
        let set = |v: &Value| match v {
            Value::Null => false,
            Value::Object(m) => !m.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => true,
        };
        for field in NOT_FOR_EPHEMERAL.iter().chain(&["resources"]) {
            if set(&c[*field]) {
                errors.push(FieldError::forbidden(
                    format!("{at}.{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        if let Some(target) = c["targetContainerName"].as_str()
            && !targets.iter().any(|t| t == target)
        {
            errors.push(FieldError::not_found(
                format!("{at}.targetContainerName"),
                target,
            ));
        }
    }
}

/// A pod spec with the fields an update may change blanked out, so two specs
/// compare equal when only those differ (scheduling gates are left to
/// their own check, and so are a gated pod's node selector and node
/// affinity). `spec.nodeName` may go from unset to set (what a binding
/// does); tolerations may only grow.
fn mutable_view(spec: &Value, new: &Value, gated: bool) -> Value {
    let mut view = spec.clone();
    let Some(map) = view.as_object_mut() else {
        return view;
    };
    if gated {
        map.remove("nodeSelector");
        if let Some(affinity) = map.get_mut("affinity").and_then(Value::as_object_mut) {
            affinity.remove("nodeAffinity");
            if affinity.is_empty() {
                map.remove("affinity");
            }
        }
    }
    for field in [
        "activeDeadlineSeconds",
        "terminationGracePeriodSeconds",
        "ephemeralContainers",
        // Checked on their own: gates may only be removed.
        "schedulingGates",
    ] {
        map.remove(field);
    }
    if map
        .get("nodeName")
        .is_none_or(|n| n.as_str().is_none_or(str::is_empty))
    {
        map.remove("nodeName");
        if let Some(n) = new.get("nodeName") {
            map.insert("nodeName".into(), n.clone());
        }
    }
    let tolerations = map
        .remove("tolerations")
        .and_then(|t| t.as_array().cloned())
        .unwrap_or_default();
    let kept = new["tolerations"]
        .as_array()
        .is_none_or(|now| tolerations.iter().all(|t| now.contains(t)));
    map.insert("tolerationsKept".into(), Value::Bool(kept));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = map.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers {
                if let Some(c) = c.as_object_mut() {
                    c.remove("image");
                }
            }
        }
    }
    view
}

/// A PodSpec at `path`: containers present, each named (DNS label, unique)
/// with an image, ports in range.
pub(crate) fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    pod_spec_claiming(spec, path, &[], errors);
}

/// [`pod_spec`] of a template whose pods also get the volumes named
/// `claimed` from elsewhere: a StatefulSet's controller adds one volume per
/// claim template, so mounts of those names are declared. (Upstream checks
/// no StatefulSet pod template for that reason; its own note asks for this
/// union instead.)
fn pod_spec_claiming(spec: &Value, path: &str, claimed: &[&str], errors: &mut Vec<FieldError>) {
    let containers = spec["containers"].as_array();
    if containers.is_none_or(|c| c.is_empty()) {
        errors.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut volumes = super::pod_volumes::volumes(spec, path, errors);
    volumes.extend_from_slice(claimed);
    let mut seen: Vec<&str> = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            unique_label(c["name"].as_str(), &format!("{at}.name"), &mut seen, errors);
            if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
                errors.push(FieldError::required(format!("{at}.image"), ""));
            }
            super::ports::container_ports(c, &at, errors);
            super::env::container_env(c, &at, errors);
            super::one_of(
                c,
                "imagePullPolicy",
                &["Always", "IfNotPresent", "Never"],
                &at,
                errors,
            );
            super::one_of(
                c,
                "terminationMessagePolicy",
                &["File", "FallbackToLogsOnError"],
                &at,
                errors,
            );
            super::pod_volumes::mounts(c, &volumes, &at, errors);
            container_resources(&c["resources"], &format!("{at}.resources"), errors);
            resize_policy(c, &spec["restartPolicy"], &at, errors);
            container_restart_policy(c, list == "initContainers", &at, errors);
            container_handlers(c, &spec["terminationGracePeriodSeconds"], &at, errors);
        }
    }
    for (i, gate) in spec["readinessGates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        errors.extend(validate_qualified_name(
            gate["conditionType"].as_str().unwrap_or(""),
            &format!("{path}.readinessGates[{i}].conditionType"),
        ));
    }
    let mut gates: Vec<&str> = Vec::new();
    for (i, gate) in spec["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = gate["name"].as_str().unwrap_or("");
        let at = format!("{path}.schedulingGates[{i}]");
        errors.extend(validate_qualified_name(name, &at));
        if gates.contains(&name) {
            errors.push(FieldError::duplicate(&at, name));
        }
        gates.push(name);
    }
    // A pod's own spec is at `spec`; templates sit deeper.
    super::ports::host_network(spec, path, path == "spec", errors);
    super::one_of(
        spec,
        "restartPolicy",
        &["Always", "OnFailure", "Never"],
        path,
        errors,
    );
    super::one_of(
        spec,
        "dnsPolicy",
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        path,
        errors,
    );
    for field in ["hostname", "subdomain"] {
        if let Some(name) = spec[field].as_str().filter(|n| !n.is_empty()) {
            errors.extend(super::names::validate_name(
                super::NameRule::Label,
                name,
                &format!("{path}.{field}"),
            ));
        }
    }
    if let Some(seconds) = spec["activeDeadlineSeconds"]
        .as_i64()
        .filter(|s| !(1..=i64::from(i32::MAX)).contains(s))
    {
        errors.push(FieldError::invalid(
            format!("{path}.activeDeadlineSeconds"),
            seconds,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    super::security_contexts::pod_spec(spec, path, errors);
    super::security_profiles::pod_spec(spec, path, errors);
    super::pod_placement::pod_spec(spec, path, errors);
    super::pod_dns::pod_spec(spec, path, errors);
}

/// A container's `resizePolicy`, as upstream rules it: each of `cpu` and
/// `memory` at most once, with `NotRequired` or `RestartContainer`, and
/// nothing but `NotRequired` in a pod that never restarts its containers.
fn resize_policy(c: &Value, pod_restart: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{at}.resizePolicy");
    let mut seen = Vec::new();
    for (i, policy) in c["resizePolicy"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let resource = policy["resourceName"].as_str().unwrap_or_default();
        if seen.contains(&resource) {
            errors.push(FieldError::duplicate(format!("{path}[{i}]"), resource));
        }
        seen.push(resource);
        match resource {
            "cpu" | "memory" => {}
            "" => errors.push(FieldError::required(&path, "")),
            other => errors.push(FieldError::not_supported(&path, other, &["cpu", "memory"])),
        }
        let restart = policy["restartPolicy"].as_str().unwrap_or_default();
        match restart {
            "NotRequired" | "RestartContainer" => {}
            "" => errors.push(FieldError::required(&path, "")),
            other => errors.push(FieldError::not_supported(
                &path,
                other,
                &["NotRequired", "RestartContainer"],
            )),
        }
        if pod_restart == "Never" && restart != "NotRequired" {
            errors.push(FieldError::invalid(
                &path,
                restart,
                "must be 'NotRequired' when `restartPolicy` is 'Never'",
            ));
        }
    }
}

/// A container's `resources` at `path`, as upstream's
/// validateResourceRequirements: each name a container resource, each
/// quantity at least zero, and each request within its limit — equal to
/// it for resources that cannot be overcommitted (huge pages, extended
/// resources), which must have a limit.
fn container_resources(resources: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let amount = |v: &Value| v.as_str().and_then(Amount::parse);
    for list in ["limits", "requests"] {
        for (name, quantity) in resources[list].as_object().into_iter().flatten() {
            let at = format!("{path}.{list}[{name}]");
            container_resource_name(name, &at, errors);
            if amount(quantity).is_some_and(|a| a.milli() < 0) {
                errors.push(FieldError::invalid(
                    at,
                    quantity.clone(),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    let (limits, requests) = (format!("{path}.limits"), format!("{path}.requests"));
    for (name, quantity) in resources["requests"].as_object().into_iter().flatten() {
        let overcommits = !name.starts_with("hugepages-")
            && (!name.contains('/') || name.contains("kubernetes.io/"));
        let (Some(request), limit) = (amount(quantity), &resources["limits"][name]) else {
            continue;
        };
        let shown = |a: Amount| Value::String(a.to_string());
        match amount(limit) {
            Some(limit) if !overcommits && request != limit => errors.push(FieldError::invalid(
                &requests,
                shown(request),
                format!("must be equal to {name} limit of {limit}"),
            )),
            Some(limit) if request > limit => errors.push(FieldError::invalid(
                &requests,
                shown(request),
                format!("must be less than or equal to {name} limit of {limit}"),
            )),
            None if limit.is_null() && !overcommits => errors.push(FieldError::required(
                &limits,
                "Limit must be set for non overcommitable resources",
            )),
            _ => {}
        }
    }
}

/// A resource name a container may ask for: a qualified name, and without
/// a prefix one of [`CONTAINER`] or huge pages.
fn container_resource_name(name: &str, at: &str, errors: &mut Vec<FieldError>) {
    let malformed = validate_qualified_name(name, at);
    if !malformed.is_empty() {
        errors.extend(malformed);
        return;
    }
    let for_containers = CONTAINER.contains(&name) || name.starts_with("hugepages-");
    if !name.contains('/') && !for_containers {
        // Names a quota may count are standard, only not for containers.
        if !resource_names::is_standard(name) {
            errors.push(FieldError::invalid(
                at,
                name,
                "must be a standard resource type or fully qualified",
            ));
        }
        errors.push(FieldError::invalid(
            at,
            name,
            "must be a standard resource for containers",
        ));
    }
}

/// A container's own `restartPolicy`, as upstream rules it: only an init
/// container may have one, and only `Always` (a sidecar); an init container
/// without it runs to completion, so it may not have probes or lifecycle
/// hooks.
fn container_restart_policy(c: &Value, init: bool, at: &str, errors: &mut Vec<FieldError>) {
    let policy = &c["restartPolicy"];
    if !init {
        if !policy.is_null() {
            errors.push(FieldError::forbidden(
                format!("{at}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
        return;
    }
    match policy.as_str() {
        Some("Always") => return,
        Some(other) => errors.push(FieldError::not_supported(
            format!("{at}.restartPolicy"),
            other,
            &["Always"],
        )),
        None => {}
    }
    for field in [
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    ] {
        if !c[field].is_null() {
            errors.push(FieldError::forbidden(
                format!("{at}.{field}"),
                "may not be set for init containers without restartPolicy=Always",
            ));
        }
    }
}

/// A container's probes and lifecycle hooks each name exactly one handler,
/// in upstream's words: none is `Required: must specify a handler type`,
/// a second is `Forbidden: may not specify more than 1 handler type`.
/// A `sleep` hook lasts from none to the pod's `grace_period`.
fn container_handlers(c: &Value, grace_period: &Value, at: &str, errors: &mut Vec<FieldError>) {
    const PROBE: [&str; 4] = ["exec", "httpGet", "tcpSocket", "grpc"];
    const HOOK: [&str; 4] = ["exec", "httpGet", "tcpSocket", "sleep"];
    let probes = ["livenessProbe", "readinessProbe", "startupProbe"]
        .map(|probe| (format!("{at}.{probe}"), &c[probe], &PROBE[..]));
    let hooks = ["postStart", "preStop"].map(|hook| {
        (
            format!("{at}.lifecycle.{hook}"),
            &c["lifecycle"][hook],
            &HOOK[..],
        )
    });
    for (path, probe, _) in &probes {
        probe_settings(probe, path, errors);
    }
    for probe in ["livenessProbe", "startupProbe"] {
        let threshold = &c[probe]["successThreshold"];
        if c[probe].is_object() && threshold.as_i64().is_some_and(|t| t != 1) {
            errors.push(FieldError::invalid(
                format!("{at}.{probe}.successThreshold"),
                threshold.clone(),
                "must be 1",
            ));
        }
    }
    let readiness_grace = &c["readinessProbe"]["terminationGracePeriodSeconds"];
    if !readiness_grace.is_null() {
        errors.push(FieldError::invalid(
            format!("{at}.readinessProbe.terminationGracePeriodSeconds"),
            readiness_grace.clone(),
            "must not be set for readinessProbes",
        ));
    }
    for (path, handler, kinds) in probes.into_iter().chain(hooks) {
        if !handler.is_object() {
            continue;
        }
        let sleep = &handler["sleep"]["seconds"];
        if let (Some(seconds), Some(grace)) = (sleep.as_i64(), grace_period.as_i64())
            && !(0..=grace).contains(&seconds)
        {
            errors.push(FieldError::invalid(
                format!("{path}.sleep"),
                seconds,
                format!(
                    "must be non-negative and less than terminationGracePeriodSeconds ({grace})"
                ),
            ));
        }
        super::ports::handler_ports(handler, &path, errors);
        let mut named = kinds.iter().filter(|kind| !handler[**kind].is_null());
        if named.next().is_none() {
            errors.push(FieldError::required(path, "must specify a handler type"));
            continue;
        }
        for extra in named {
            errors.push(FieldError::forbidden(
                format!("{path}.{extra}"),
                "may not specify more than 1 handler type",
            ));
        }
    }
}

/// A probe's counts and delays are not negative, and its own grace period
/// (which overrides the pod's) is positive.
fn probe_settings(probe: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if !probe.is_object() {
        return;
    }
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        super::non_negative_at(probe, path, field, errors);
    }
    if let Some(seconds) = probe["terminationGracePeriodSeconds"]
        .as_i64()
        .filter(|s| *s <= 0)
    {
        errors.push(FieldError::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            seconds,
            "must be greater than 0",
        ));
    }
}

/// How one `apps/v1` kind words its selector checks: upstream's validation
/// of each differs a little.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SelectorRule {
    /// The kind an empty selector "is invalid for" (ReplicaSets say
    /// "deployment", as upstream's).
    pub(crate) empty_for: &'static str,
    /// The detail of the error on the whole selector when it cannot be
    /// built from its parts; `None` where upstream reports only the parts.
    pub(crate) unusable: Option<&'static str>,
    /// Whether a missing selector is its own error (otherwise it selects
    /// nothing, so it does not match the template's labels).
    pub(crate) required: bool,
}

/// Deployments, ReplicaSets, StatefulSets, DaemonSets: a valid, non-empty
/// selector that selects the template's labels, a valid template and
/// non-negative replicas. What an update may change is each kind's own
/// rule ([`selector_unchanged`], [`stateful_set_update`]).
pub(crate) fn workload(object: &Value, rule: SelectorRule, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    if let Some(r) = spec["replicas"].as_i64()
        && r < 0
    {
        errors.push(FieldError::invalid(
            "spec.replicas",
            r,
            "must be greater than or equal to 0",
        ));
    }
    let selector = &spec["selector"];
    let mismatch = || {
        let labels = &spec["template"]["metadata"]["labels"];
        FieldError::invalid(
            "spec.template.metadata.labels",
            labels.clone(),
            "`selector` does not match template `labels`",
        )
        .shown_as(crate::go_format::go_string_map(labels))
    };
    if selector.is_null() {
        errors.push(if rule.required {
            FieldError::required("spec.selector", "")
        } else {
            mismatch()
        });
    } else {
        let before = errors.len();
        label_selector(selector, "spec.selector", errors);
        let usable = errors.len() == before;
        let parsed = LabelSelector::from_object(selector).ok().filter(|_| usable);
        let empty = ["matchLabels", "matchExpressions"]
            .iter()
            .all(|part| match &selector[*part] {
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => true,
            });
        // Upstream shows the selector as Go prints its type.
        let shown = crate::go_format::go_label_selector(selector);
        let empty_error = FieldError::invalid(
            "spec.selector",
            selector.clone(),
            format!("empty selector is invalid for {}", rule.empty_for),
        )
        .shown_as(shown.clone());
        // Upstream's DaemonSet checks the match before the emptiness.
        if rule.unusable.is_none() {
            if parsed.is_some_and(|s| !s.matches(&spec["template"])) {
                errors.push(mismatch());
            }
            if empty {
                errors.push(empty_error);
            }
        } else {
            if empty {
                errors.push(empty_error);
            }
            match (parsed, rule.unusable) {
                (None, Some(detail)) => errors.push(
                    FieldError::invalid("spec.selector", selector.clone(), detail).shown_as(shown),
                ),
                (Some(s), _) if !s.is_empty() && !s.matches(&spec["template"]) => {
                    errors.push(mismatch())
                }
                _ => {}
            }
        }
    }
    // Only a StatefulSet has claim templates.
    let claimed: Vec<&str> = spec["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|claim| claim["metadata"]["name"].as_str())
        .collect();
    pod_spec_claiming(
        &spec["template"]["spec"],
        "spec.template.spec",
        &claimed,
        errors,
    );
}

/// A `metav1.LabelSelector` at `path`, checked as upstream's
/// ValidateLabelSelector (label values strictly): its labels, and each
/// expression's operator, key and values.
pub(crate) fn label_selector(selector: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let labels = format!("{path}.matchLabels");
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        errors.extend(validate_qualified_name(key, &labels));
        errors.extend(validate_label_value(
            value.as_str().unwrap_or_default(),
            &labels,
        ));
    }
    let expressions = selector["matchExpressions"].as_array();
    for (i, expr) in expressions.into_iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        selector_requirement(expr, &at, false, true, errors);
    }
}

/// One requirement of a label selector (or, with `ordered`, of a node
/// selector, which also takes `Gt` and `Lt`) at `at`: the values its
/// operator needs, its key, and (with `check_values`) each value a label
/// value, as upstream's selector and node selector validation word them.
pub(crate) fn selector_requirement(
    expr: &Value,
    at: &str,
    ordered: bool,
    check_values: bool,
    errors: &mut Vec<FieldError>,
) {
    let values = expr["values"].as_array().map_or(&[][..], Vec::as_slice);
    match expr["operator"].as_str().unwrap_or_default() {
        "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
            format!("{at}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
            format!("{at}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if ordered && values.len() != 1 => errors.push(FieldError::required(
            format!("{at}.values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        "Gt" | "Lt" if ordered => {}
        other => errors.push(FieldError::invalid(
            format!("{at}.operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errors.extend(validate_qualified_name(
        expr["key"].as_str().unwrap_or_default(),
        &format!("{at}.key"),
    ));
    if check_values {
        for (j, value) in values.iter().enumerate() {
            errors.extend(validate_label_value(
                value.as_str().unwrap_or_default(),
                &format!("{at}.values[{j}]"),
            ));
        }
    }
}

/// An update keeps the selector (Deployments, ReplicaSets, DaemonSets).
pub(crate) fn selector_unchanged(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let selector = &new["spec"]["selector"];
    if old["spec"]["selector"] != *selector {
        errors.push(
            FieldError::invalid("spec.selector", selector.clone(), "field is immutable")
                .shown_as(crate::go_format::go_label_selector(selector)),
        );
    }
}

/// `path` of `new` is what it was in `old`: upstream's "field is immutable"
/// (a field set to null is a field not set).
pub(crate) fn immutable(old: &Value, new: &Value, path: &[&str], errors: &mut Vec<FieldError>) {
    let at = |object: &Value| path.iter().fold(object, |v, key| &v[*key]).clone();
    let now = at(new);
    if at(old) != now {
        errors.push(FieldError::invalid(
            path.join("."),
            now,
            "field is immutable",
        ));
    }
}

/// The fields of a StatefulSet's spec an update may change; upstream
/// refuses a change of any other with one error about the whole spec.
const STATEFUL_SET_MUTABLE: &[&str] = &[
    "replicas",
    "template",
    "updateStrategy",
    "minReadySeconds",
    "ordinals",
    "persistentVolumeClaimRetentionPolicy",
];

/// A StatefulSet's spec changes only in [`STATEFUL_SET_MUTABLE`].
pub(crate) fn stateful_set_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let fixed = |object: &Value| {
        let mut spec = object["spec"].clone();
        if let Some(map) = spec.as_object_mut() {
            map.retain(|key, v| !v.is_null() && !STATEFUL_SET_MUTABLE.contains(&key.as_str()));
        }
        spec
    };
    if fixed(old) != fixed(new) {
        errors.push(FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

pub(crate) fn replication_controller(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    if let Some(selector) = spec["selector"].as_object() {
        let template_labels = &spec["template"]["metadata"]["labels"];
        let matches = selector.iter().all(|(k, v)| &template_labels[k] == v);
        if !matches {
            errors.push(FieldError::invalid(
                "spec.template.metadata.labels",
                template_labels.clone(),
                "`selector` does not match template `labels`",
            ));
        }
    }
    if !spec["template"].is_null() {
        pod_spec(&spec["template"]["spec"], "spec.template.spec", errors);
    }
}

pub(crate) fn service(object: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    if let Some(old) = old
        && let Some(was) = old["spec"]["clusterIP"]
            .as_str()
            .filter(|ip| !ip.is_empty())
        && spec["clusterIP"].as_str().is_some_and(|now| now != was)
    {
        errors.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            spec["clusterIP"].clone(),
            "may not change once set",
        ));
    }
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&kind) {
        errors.push(FieldError::not_supported("spec.type", kind, TYPES));
    }
    if kind == "ExternalName" {
        // A CNAME, which may end in a dot to say it is fully qualified.
        let name = spec["externalName"].as_str().unwrap_or_default();
        let cname = name.strip_suffix('.').unwrap_or(name);
        if cname.is_empty() {
            errors.push(FieldError::required("spec.externalName", ""));
        } else {
            errors.extend(validate_name(
                NameRule::Subdomain,
                cname,
                "spec.externalName",
            ));
        }
        // Nothing routes to an alias by address: it has none to give.
        let set = |field: &str| match &spec[field] {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(items) => !items.is_empty(),
            _ => true,
        };
        for (field, shown) in [
            ("clusterIP", "clusterIPs"),
            ("clusterIPs", "clusterIPs"),
            ("ipFamilies", "ipFamilies"),
            ("ipFamilyPolicy", "ipFamilyPolicy"),
        ] {
            let path = format!("spec.{shown}");
            if set(field) && !errors.iter().any(|e| e.field == path) {
                errors.push(FieldError::forbidden(
                    path,
                    "may not be set for ExternalName services",
                ));
            }
        }
    }
    let headless = spec["clusterIP"] == "None";
    let ports = spec["ports"].as_array();
    if kind != "ExternalName" && !headless && ports.is_none_or(|p| p.is_empty()) {
        errors.push(FieldError::required("spec.ports", ""));
    }
    let many = ports.is_some_and(|p| p.len() > 1);
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.into_iter().flatten().enumerate() {
        super::ports::number(&p["port"], &format!("spec.ports[{i}].port"), true, errors);
        super::ports::number_or_name(
            &p["targetPort"],
            &format!("spec.ports[{i}].targetPort"),
            errors,
        );
        match p["name"].as_str() {
            None | Some("") if many => {
                errors.push(FieldError::required(format!("spec.ports[{i}].name"), ""))
            }
            Some(n) if names.contains(&n) => {
                errors.push(FieldError::duplicate(format!("spec.ports[{i}].name"), n))
            }
            Some(n) => names.push(n),
            None => {}
        }
        super::one_of(
            p,
            "protocol",
            &["SCTP", "TCP", "UDP"],
            &format!("spec.ports[{i}]"),
            errors,
        );
        if kind == "ClusterIP" && p["nodePort"].as_i64().is_some_and(|n| n != 0) {
            errors.push(FieldError::forbidden(
                format!("spec.ports[{i}].nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
    }
    super::service_policies::spec(spec, kind, errors);
}
