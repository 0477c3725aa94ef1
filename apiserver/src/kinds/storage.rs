//! `storage.k8s.io/v1` kinds with rules of their own: StorageClasses
//! (what happens to a released volume, when volumes bind), CSIDrivers
//! (what the driver is assumed to need when its object does not say),
//! CSINodes (a node writes only its own) and VolumeAttachments (named by
//! the Node authorizer).

use serde_json::{Value, json};

use super::{KindStrategy, NodeWrites, Written, set_default};
use crate::registry::ResourceInfo;
use crate::status::FieldError;

/// The `storageclasses` resource.
#[derive(Debug)]
pub(crate) struct StorageClasses;

impl KindStrategy for StorageClasses {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_default(object, "reclaimPolicy", json!("Delete"));
        set_default(object, "volumeBindingMode", json!("Immediate"));
    }

    /// A known reclaim policy and binding mode, and a provisioner named as
    /// a qualified name, as upstream's ValidateStorageClass.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let object = written.object;
        let provisioner = object["provisioner"].as_str().unwrap_or_default();
        if provisioner.is_empty() {
            errors.push(FieldError::required("provisioner", ""));
        } else {
            errors.extend(crate::validation::validate_qualified_name(
                &provisioner.to_lowercase(),
                "provisioner",
            ));
        }
        crate::validation::one_of(object, "reclaimPolicy", &["Delete", "Retain"], "", errors);
        crate::validation::one_of(
            object,
            "volumeBindingMode",
            &["Immediate", "WaitForFirstConsumer"],
            "",
            errors,
        );
    }
}

/// The `csidrivers` resource.
#[derive(Debug)]
pub(crate) struct CsiDrivers;

impl KindStrategy for CsiDrivers {
    /// Upstream v1.33's answers for a driver that says nothing: it needs
    /// attaching, wants no pod info, reports no capacity, manages its own
    /// fsGroup only for ReadWriteOnce volumes with an fsType, serves
    /// persistent volumes, needs no republishing and no SELinux mounts.
    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "attachRequired", json!(true));
        set_default(spec, "podInfoOnMount", json!(false));
        set_default(spec, "storageCapacity", json!(false));
        set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        set_default(spec, "volumeLifecycleModes", json!(["Persistent"]));
        set_default(spec, "requiresRepublish", json!(false));
        set_default(spec, "seLinuxMount", json!(false));
    }
}

named_kind! {
    /// The `csinodes` resource: one per node, named after it.
    CsiNodes = k8s_openapi::api::storage::v1::CSINode;
}

impl KindStrategy for CsiNodes {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnName("CSINode")
    }
}

named_kind! {
    /// The `volumeattachments` resource: no rules of its own, but its name for
    /// the Node authorizer and its watch cache.
    VolumeAttachments = k8s_openapi::api::storage::v1::VolumeAttachment;
}

impl KindStrategy for VolumeAttachments {}
