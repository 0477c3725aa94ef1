//! A LimitRange's bounds: `min`, `max` and `maxLimitRequestRatio` of each
//! container (type Container) and of the pod as a whole (type Pod), and
//! `min`/`max` of a claim's requested storage (type PersistentVolumeClaim).
//! Each violation is one message in upstream's words; values print in
//! canonical form.

use serde_json::Value;
use skiff_common::amount::Amount;
use skiff_common::quota::pods::{all_containers, pod_limits, pod_requests};
use skiff_common::quota::{ResourceList, read_list};

/// What one item of a LimitRange bounds, by resource name.
struct Bounds {
    kind: String,
    min: ResourceList,
    max: ResourceList,
    ratio: ResourceList,
}

fn items(range: &Value, kind: &str) -> Vec<Bounds> {
    range["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == kind)
        .map(|item| Bounds {
            kind: kind.to_string(),
            min: read_list(&item["min"]),
            max: read_list(&item["max"]),
            ratio: read_list(&item["maxLimitRequestRatio"]),
        })
        .collect()
}

/// Checks one set of requests and limits (a container's, or the pod's sums)
/// against `bounds`.
fn check(
    bounds: &Bounds,
    requests: &ResourceList,
    limits: &ResourceList,
    errors: &mut Vec<String>,
) {
    let kind = &bounds.kind;
    for (name, min) in &bounds.min {
        let request = requests.get(name);
        let limit = limits.get(name);
        match request {
            None => errors.push(format!(
                "minimum {name} usage per {kind} is {min}.  No request is specified"
            )),
            Some(r) if r < min => errors.push(format!(
                "minimum {name} usage per {kind} is {min}, but request is {r}"
            )),
            Some(_) => match limit {
                Some(l) if l < min => errors.push(format!(
                    "minimum {name} usage per {kind} is {min}, but limit is {l}"
                )),
                _ => {}
            },
        }
    }
    for (name, max) in &bounds.max {
        match (limits.get(name), requests.get(name)) {
            (None, _) => errors.push(format!(
                "maximum {name} usage per {kind} is {max}.  No limit is specified"
            )),
            (Some(l), _) if l > max => errors.push(format!(
                "maximum {name} usage per {kind} is {max}, but limit is {l}"
            )),
            (_, Some(r)) if r > max => errors.push(format!(
                "maximum {name} usage per {kind} is {max}, but request is {r}"
            )),
            _ => {}
        }
    }
    for (name, ratio) in &bounds.ratio {
        ratio_check(
            kind,
            name,
            *ratio,
            requests.get(name),
            limits.get(name),
            errors,
        );
    }
}

fn ratio_check(
    kind: &str,
    name: &str,
    max: Amount,
    request: Option<&Amount>,
    limit: Option<&Amount>,
    errors: &mut Vec<String>,
) {
    let prefix = format!("{name} max limit to request ratio per {kind} is {max}");
    let request = match request {
        Some(r) if !r.is_zero() => r,
        _ => {
            errors.push(format!(
                "{prefix}, but no request is specified or request is 0"
            ));
            return;
        }
    };
    let limit = match limit {
        Some(l) if !l.is_zero() => l,
        _ => {
            errors.push(format!("{prefix}, but no limit is specified or limit is 0"));
            return;
        }
    };
    // Both in thousandths, so the ratio compares with the bound's milli value.
    let observed = limit.milli() as f64 / request.milli() as f64;
    if observed * 1000.0 > max.milli() as f64 {
        errors.push(format!("{prefix}, but provided ratio is {observed:.6}"));
    }
}

/// What `range` has against `pod`: each container (init containers too)
/// against the Container items, the pod's totals against the Pod items.
pub(super) fn pod(range: &Value, pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for bounds in items(range, "Container") {
        for container in all_containers(pod) {
            let requests = read_list(&container["resources"]["requests"]);
            let limits = read_list(&container["resources"]["limits"]);
            check(&bounds, &requests, &limits, &mut errors);
        }
    }
    let pod_items = items(range, "Pod");
    if !pod_items.is_empty() {
        let (requests, limits) = (pod_requests(pod), pod_limits(pod));
        for bounds in pod_items {
            check(&bounds, &requests, &limits, &mut errors);
        }
    }
    errors
}

/// What `range` has against a claim's requested storage: at least `min`,
/// at most `max` (limits are not the user's to set on claims).
pub(super) fn claim(range: &Value, claim: &Value) -> Vec<String> {
    let requests = read_list(&claim["spec"]["resources"]["requests"]);
    let mut errors = Vec::new();
    for bounds in items(range, "PersistentVolumeClaim") {
        let kind = &bounds.kind;
        for (name, min) in &bounds.min {
            match requests.get(name) {
                None => errors.push(format!(
                    "minimum {name} usage per {kind} is {min}.  No request is specified"
                )),
                Some(r) if r < min => errors.push(format!(
                    "minimum {name} usage per {kind} is {min}, but request is {r}"
                )),
                Some(_) => {}
            }
        }
        for (name, max) in &bounds.max {
            match requests.get(name) {
                None => errors.push(format!(
                    "maximum {name} usage per {kind} is {max}.  No request is specified"
                )),
                Some(r) if r > max => errors.push(format!(
                    "maximum {name} usage per {kind} is {max}, but request is {r}"
                )),
                Some(_) => {}
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn range(items: Value) -> Value {
        json!({"spec": {"limits": items}})
    }

    fn one_container(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c", "resources": resources}]}})
    }

    #[test]
    fn container_bounds_and_ratios_in_upstreams_words() {
        let bounds = json!({"type": "Container",
            "min": {"cpu": "100m"}, "max": {"memory": "1Gi"}});
        let ratio = json!({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}});
        let cases: [(&Value, Value, &[&str]); 6] = [
            (
                &bounds,
                json!({"requests": {"cpu": "0.05"}, "limits": {"memory": "2Gi"}}),
                &[
                    "minimum cpu usage per Container is 100m, but request is 50m",
                    "maximum memory usage per Container is 1Gi, but limit is 2Gi",
                ],
            ),
            (
                &bounds,
                json!({}),
                &[
                    "minimum cpu usage per Container is 100m.  No request is specified",
                    "maximum memory usage per Container is 1Gi.  No limit is specified",
                ],
            ),
            (
                &bounds,
                json!({"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}),
                &[],
            ),
            (
                &ratio,
                json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}),
                &[
                    "cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000",
                ],
            ),
            (
                &ratio,
                json!({"limits": {"cpu": "300m"}}),
                &[
                    "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0",
                ],
            ),
            (
                &ratio,
                json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}),
                &[],
            ),
        ];
        for (limit, resources, wanted) in cases {
            let got = pod(&range(json!([limit])), &one_container(resources.clone()));
            assert_eq!(got, wanted, "{limit} {resources}");
        }
    }

    #[test]
    fn pod_bounds_apply_to_the_sum_of_its_containers() {
        let r = range(json!([{"type": "Pod", "max": {"cpu": "1"}}]));
        let two = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "600m"}}},
            {"name": "b", "resources": {"limits": {"cpu": "600m"}}}
        ]}});
        assert_eq!(
            pod(&r, &two),
            vec!["maximum cpu usage per Pod is 1, but limit is 1200m"]
        );
    }

    #[test]
    fn claims_are_bounded_by_their_request() {
        let r = range(json!([{"type": "PersistentVolumeClaim",
            "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]));
        let pvc = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});
        assert_eq!(
            claim(&r, &pvc("512Mi")),
            vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 512Mi"]
        );
        assert_eq!(
            claim(&r, &pvc("20Gi")),
            vec!["maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"]
        );
        assert!(claim(&r, &pvc("5Gi")).is_empty());
    }
}
