//! `storage.k8s.io/v1` kinds with rules of their own: StorageClasses
//! (what happens to a released volume, when volumes bind), CSIDrivers
//! (what the driver is assumed to need when its object does not say, and
//! its policies and token requests as upstream checks them), CSINodes (a
//! node writes only its own) and VolumeAttachments (named by the Node
//! authorizer; an attacher, a node and one source, never changed).

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

    /// Upstream's rules: a known fsGroup policy and lifecycle modes, token
    /// audiences once each with lifetimes of ten minutes to 2^32 seconds,
    /// and once made, the same attach and lifecycle answers.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        crate::validation::one_of(
            spec,
            "fsGroupPolicy",
            &["File", "None", "ReadWriteOnceWithFSType"],
            "spec",
            errors,
        );
        for mode in spec["volumeLifecycleModes"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let mode = mode.as_str().unwrap_or("");
            if mode != "Persistent" && mode != "Ephemeral" {
                errors.push(FieldError::not_supported(
                    "spec.volumeLifecycleModes",
                    mode,
                    &["Persistent", "Ephemeral"],
                ));
            }
        }
        let mut audiences: Vec<&str> = Vec::new();
        for (i, request) in spec["tokenRequests"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("spec.tokenRequests[{i}]");
            let audience = request["audience"].as_str().unwrap_or("");
            if audiences.contains(&audience) {
                errors.push(FieldError::duplicate(format!("{at}.audience"), audience));
                continue;
            }
            audiences.push(audience);
            let Some(seconds) = request["expirationSeconds"].as_i64() else {
                continue;
            };
            if seconds < 600 {
                errors.push(FieldError::invalid(
                    format!("{at}.expirationSeconds"),
                    seconds,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if seconds > 1 << 32 {
                errors.push(FieldError::invalid(
                    format!("{at}.expirationSeconds"),
                    seconds,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
        if let Some(old) = written.old {
            // Upstream's path keeps its misspelling of the field.
            if old["spec"]["attachRequired"] != spec["attachRequired"] {
                errors.push(FieldError::invalid(
                    "spec.attachedRequired",
                    spec["attachRequired"].clone(),
                    "field is immutable",
                ));
            }
            crate::validation::workloads::immutable(
                old,
                written.object,
                &["spec", "volumeLifecycleModes"],
                errors,
            );
        }
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
    /// The `volumeattachments` resource, named for the Node authorizer and
    /// its watch cache.
    VolumeAttachments = k8s_openapi::api::storage::v1::VolumeAttachment;
}

impl KindStrategy for VolumeAttachments {
    /// Upstream's rules: an attacher, a node name, exactly one source, and
    /// a spec that never changes.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        if written.status_only() {
            return;
        }
        let spec = &written.object["spec"];
        if spec["attacher"].as_str().unwrap_or("").is_empty() {
            errors.push(FieldError::required("spec.attacher", ""));
        }
        let source = &spec["source"];
        let (inline, volume) = (&source["inlineVolumeSpec"], &source["persistentVolumeName"]);
        const ONE: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
        match (inline.is_null(), volume.as_str()) {
            (true, None) => errors.push(FieldError::required("spec.source", ONE)),
            (false, Some(_)) => errors.push(FieldError::forbidden("spec.source", ONE)),
            (true, Some("")) => errors.push(FieldError::required(
                "spec.source.persistentVolumeName",
                "must specify non empty persistentVolumeName",
            )),
            _ => {}
        }
        errors.extend(crate::validation::validate_name(
            crate::validation::NameRule::Subdomain,
            spec["nodeName"].as_str().unwrap_or(""),
            "spec.nodeName",
        ));
        if let Some(old) = written.old
            && old["spec"] != *spec
        {
            errors.push(FieldError::invalid(
                "spec",
                spec.clone(),
                "field is immutable",
            ));
        }
    }
}
