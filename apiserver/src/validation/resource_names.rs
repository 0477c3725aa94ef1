//! Which resource names upstream counts as standard, for quota and for
//! containers, and which count whole units: the name sets of upstream's
//! `IsStandardResourceName`, `IsStandardQuotaResourceName` and
//! `IsIntegerResourceName`, in one place for the quota, limit and
//! container checks.

/// Compute and storage names standard for some purpose (quota, containers
/// or volumes).
const AMOUNTS: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "storage",
    "requests.storage",
];

/// Object counts, standard too: quantities of these are whole numbers.
const COUNTS: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// The resources a container may name without a prefix (`hugepages-<size>`
/// too).
pub(crate) const CONTAINER: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// Huge pages as a quota names them, with or without `requests.`.
fn is_quota_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

/// Upstream's IsStandardResourceName.
pub(crate) fn is_standard(name: &str) -> bool {
    AMOUNTS.contains(&name) || COUNTS.contains(&name) || is_quota_huge_pages(name)
}

/// Upstream's IsStandardQuotaResourceName: the standard names but the
/// bare `storage` (a quota counts `requests.storage`).
pub(crate) fn is_standard_for_quota(name: &str) -> bool {
    is_standard(name) && name != "storage"
}

/// Upstream's IsIntegerResourceName: object counts, and extended resources
/// (a domain-prefixed name outside `kubernetes.io`, which `count/<resource>`
/// is too).
pub(crate) fn is_integer(name: &str) -> bool {
    let extended = name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && super::validate_qualified_name(&format!("requests.{name}"), "").is_empty();
    COUNTS.contains(&name) || extended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_quota_and_integer_names_are_upstreams() {
        assert!(is_standard("requests.storage") && !is_standard("limits.storage"));
        assert!(is_standard_for_quota("requests.hugepages-2Mi"));
        assert!(!is_standard_for_quota("storage") && !is_standard_for_quota("request.cpu"));
        assert!(is_integer("pods") && is_integer("count/deployments.apps"));
        assert!(is_integer("example.com/gpu") && !is_integer("requests.example.com/gpu"));
        assert!(!is_integer("cpu") && !is_integer("kubernetes.io/something"));
    }
}
