//! Patch strategies of the built-in types' lists: which lists merge, and by
//! which key. Keyed by field name with the parent field for the few names
//! whose meaning depends on where they sit (container vs service ports).

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// The patch's list replaces the original.
    Replace,
    /// Lists of maps merge by this key.
    MergeByKey(&'static str),
    /// Lists of scalars merge as a set union.
    MergePrimitives,
}

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// The strategy of the list at `path` (field names from the object root;
/// list indexes are not part of it).
pub(crate) fn list_strategy(path: &[&str]) -> ListStrategy {
    use ListStrategy::*;
    let Some((field, parents)) = path.split_last() else {
        return Replace;
    };
    let parent = parents.last().copied().unwrap_or("");
    match *field {
        "containers" | "initContainers" | "ephemeralContainers" => MergeByKey("name"),
        "env" | "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates" => {
            MergeByKey("name")
        }
        "volumeMounts" => MergeByKey("mountPath"),
        "volumeDevices" => MergeByKey("devicePath"),
        "ports" if CONTAINER_LISTS.contains(&parent) => MergeByKey("containerPort"),
        "ports" if parent == "spec" && parents.len() == 1 => MergeByKey("port"),
        "finalizers" if parent == "metadata" => MergePrimitives,
        "ownerReferences" if parent == "metadata" => MergeByKey("uid"),
        "conditions" => MergeByKey("type"),
        "hostAliases" => MergeByKey("ip"),
        "podIPs" | "hostIPs" => MergeByKey("ip"),
        "topologySpreadConstraints" => MergeByKey("topologyKey"),
        "addresses" if parent == "status" => MergeByKey("type"),
        _ => Replace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_depend_on_their_parent() {
        assert_eq!(
            list_strategy(&["spec", "template", "spec", "containers", "ports"]),
            ListStrategy::MergeByKey("containerPort")
        );
        assert_eq!(
            list_strategy(&["spec", "ports"]),
            ListStrategy::MergeByKey("port")
        );
        assert_eq!(
            list_strategy(&["spec", "tolerations"]),
            ListStrategy::Replace
        );
        assert_eq!(
            list_strategy(&["metadata", "finalizers"]),
            ListStrategy::MergePrimitives
        );
    }
}
