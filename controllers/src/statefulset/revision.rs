//! StatefulSet revisions: a revision is named after the hash of what it
//! stores, and pods carry the revision's whole name in their
//! `controller-revision-hash` label.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::controller_utils::{controller_owner_ref, safe_hash};
use crate::history::{Proposal, revision_data};

/// The pod label naming the revision a pod was made from.
pub(super) const REVISION_LABEL: &str = crate::history::REVISION_HASH_LABEL;

/// The label carrying the hash on a StatefulSet's revisions.
const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The revision-to-be of the set's current template.
pub(super) fn proposal<'a>(
    set: &'a StatefulSet,
    template: &'a PodTemplateSpec,
    collision_count: Option<i32>,
) -> Proposal<'a> {
    let data = serde_json::to_vec(&revision_data(template)).unwrap_or_default();
    Proposal {
        owner: &set.metadata,
        owner_ref: controller_owner_ref(set),
        template,
        hash_label: HASH_LABEL,
        hash: safe_hash(&data, collision_count),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "c", "image": "pg:1"}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn the_hash_follows_the_template_and_the_collision_count() {
        let s = set();
        let template = s.spec.as_ref().unwrap().template.clone();
        let mut other = template.clone();
        other.spec.as_mut().unwrap().containers[0].image = Some("pg:2".into());
        let hash = proposal(&s, &template, None).hash;
        assert_eq!(proposal(&s, &template, None).hash, hash);
        assert_ne!(proposal(&s, &other, None).hash, hash);
        assert_ne!(proposal(&s, &template, Some(1)).hash, hash);
        assert_eq!(proposal(&s, &template, None).hash_label, HASH_LABEL);
    }
}
