//! Index functions every component needs: by namespace, by the node a pod is
//! bound to, by owner uid and by the value of a label.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

/// Maps an object to the index values it is filed under (possibly none, possibly several).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Name of the namespace index every cache has.
pub const NAMESPACE_INDEX: &str = "namespace";
/// Name of the pod index on `spec.nodeName`.
pub const NODE_NAME_INDEX: &str = "spec.nodeName";
/// Name of the index on `metadata.ownerReferences[].uid`.
pub const OWNER_UID_INDEX: &str = "ownerUid";

/// Files namespaced objects under their namespace; cluster-scoped objects under nothing.
pub fn namespace_index<K: Resource>() -> IndexFn<K> {
    Arc::new(|obj: &K| obj.meta().namespace.iter().cloned().collect())
}

/// Files pods under the node they are bound to; unscheduled pods under nothing.
pub fn pod_node_name_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|spec| spec.node_name.clone())
            .filter(|node| !node.is_empty())
            .into_iter()
            .collect()
    })
}

/// Files objects under the uid of every owner they reference.
pub fn owner_uid_index<K: Resource>() -> IndexFn<K> {
    Arc::new(|obj: &K| {
        obj.meta()
            .owner_references
            .iter()
            .flatten()
            .map(|owner| owner.uid.clone())
            .collect()
    })
}

/// Files objects under the value of label `key` (objects without it under nothing).
pub fn label_value_index<K: Resource>(key: &str) -> IndexFn<K> {
    let key = key.to_owned();
    Arc::new(move |obj: &K| {
        obj.meta()
            .labels
            .as_ref()
            .and_then(|labels| labels.get(&key).cloned())
            .into_iter()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn builtin_index_functions_extract_their_values() {
        let mut pod = pod("ns", "p", Some("node-a"), &[("app", "web")]);
        let owner = |uid: &str| OwnerReference {
            uid: uid.into(),
            ..Default::default()
        };
        pod.metadata.owner_references = Some(vec![owner("u1"), owner("u2")]);
        assert_eq!(namespace_index::<Pod>()(&pod), ["ns"]);
        assert_eq!(pod_node_name_index()(&pod), ["node-a"]);
        assert_eq!(owner_uid_index::<Pod>()(&pod), ["u1", "u2"]);
        assert_eq!(label_value_index::<Pod>("app")(&pod), ["web"]);
        assert!(label_value_index::<Pod>("tier")(&pod).is_empty());
        assert!(pod_node_name_index()(&Pod::default()).is_empty());
    }
}
