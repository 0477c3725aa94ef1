//! PersistentVolumes and PersistentVolumeClaims: both start Pending, a
//! claim protected from deletion while in use and a volume while bound; their
//! defaults (a claim's spec also where it is a template: StatefulSets'
//! volumeClaimTemplates, pods' ephemeral volumes), what an update of a
//! claim's spec may change, and what a volume must say (access modes, a
//! capacity, a reclaim policy, one source).

use serde_json::{Value, json};
use skiff_common::amount::Amount;

use super::pods::default_volume_source;
use super::{InitialStatus, KindStrategy, NodeWrites, Written, set_default};
use crate::registry::ResourceInfo;
use crate::status::FieldError;

/// A claim's spec asks for a filesystem unless it says block.
pub(super) fn default_claim_spec(spec: &mut Value) {
    set_default(spec, "volumeMode", json!("Filesystem"));
}

named_kind! {
    /// Core `persistentvolumes`.
    PersistentVolumes = k8s_openapi::api::core::v1::PersistentVolume;
}

/// Upstream's warnings of a volume: deprecated annotations, the Recycle
/// policy, deprecated node labels in its node affinity, removed sources.
fn volume_warnings(volume: &Value) -> Vec<String> {
    use crate::validation::pod_warnings;
    let mut out = Vec::new();
    let annotations = &volume["metadata"]["annotations"];
    for (key, message) in [
        (
            BETA_CLASS_ANNOTATION,
            "deprecated since v1.8; use \"storageClassName\" attribute instead",
        ),
        (
            "volume.beta.kubernetes.io/mount-options",
            "deprecated since v1.31; use \"mountOptions\" attribute instead",
        ),
    ] {
        if annotations.get(key).is_some() {
            out.push(format!("metadata.annotations[{key}]: {message}"));
        }
    }
    let spec = &volume["spec"];
    if spec["persistentVolumeReclaimPolicy"] == "Recycle" {
        out.push(
            "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. \
             Instead, the recommended approach is to use dynamic provisioning."
                .to_owned(),
        );
    }
    let terms = &spec["nodeAffinity"]["required"]["nodeSelectorTerms"];
    for (i, term) in crate::object::indexed(terms) {
        let here = format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}]");
        pod_warnings::node_term(term, &here, &mut out);
    }
    pod_warnings::removed_volume_sources(spec, "spec", &mut out);
    out
}

/// Upstream's warnings of a claim: the deprecated class annotation and a
/// fractional storage request or limit.
fn claim_warnings(claim: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if claim["metadata"]["annotations"]
        .get(BETA_CLASS_ANNOTATION)
        .is_some()
    {
        out.push(format!(
            "metadata.annotations[{BETA_CLASS_ANNOTATION}]: deprecated since v1.8; use \"storageClassName\" attribute instead"
        ));
    }
    crate::validation::pod_warnings::claim_spec(&claim["spec"], "spec", &mut out);
    out
}

impl KindStrategy for PersistentVolumes {
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        if written.status_only() {
            return Vec::new();
        }
        volume_warnings(written.object)
    }

    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    fn on_create(&self, object: &mut Value, _notes: &crate::request_notes::RequestNotes) {
        // StorageObjectInUseProtection again: a volume is kept while a claim
        // is bound to it; the `pv-protection` controller lets it go.
        crate::object::add_finalizer(object, skiff_common::claims::PV_PROTECTION_FINALIZER);
    }

    /// A volume is kept when its claim goes (Retain) and is a filesystem,
    /// and its source gets the defaults a pod volume's would.
    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        set_default(spec, "volumeMode", json!("Filesystem"));
        default_volume_source(spec);
    }

    /// Access modes, a capacity, a known reclaim policy and exactly one
    /// source, as upstream's ValidatePersistentVolumeSpec.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        if written.status_only() {
            return;
        }
        let spec = &written.object["spec"];
        let modes = spec["accessModes"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        if modes.is_empty() {
            errors.push(FieldError::required("spec.accessModes", ""));
        }
        for mode in modes {
            let mode = mode.as_str().unwrap_or_default();
            if !ACCESS_MODES.contains(&mode) {
                errors.push(FieldError::not_supported(
                    "spec.accessModes",
                    mode,
                    ACCESS_MODES,
                ));
            }
        }
        capacity(&spec["capacity"], errors);
        crate::validation::one_of(
            spec,
            "persistentVolumeReclaimPolicy",
            &["Delete", "Recycle", "Retain"],
            "spec",
            errors,
        );
        let mut sources = PV_SOURCES.iter().filter(|s| !spec[**s].is_null());
        match sources.next() {
            None => errors.push(FieldError::required("spec", "must specify a volume type")),
            Some(_) => {
                for extra in sources {
                    errors.push(FieldError::forbidden(
                        format!("spec.{extra}"),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
    }
}

/// A PersistentVolume's sources, in the order upstream checks them.
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
    "iscsi",
];

named_kind! {
    /// Core `persistentvolumeclaims`.
    PersistentVolumeClaims = k8s_openapi::api::core::v1::PersistentVolumeClaim;
}

impl KindStrategy for PersistentVolumeClaims {
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        if written.status_only() {
            return Vec::new();
        }
        claim_warnings(written.object)
    }

    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    fn on_create(&self, object: &mut Value, _notes: &crate::request_notes::RequestNotes) {
        // Upstream's StorageObjectInUseProtection: every new claim is kept
        // while a pod uses it; the `pvc-protection` controller lets it go.
        crate::object::add_finalizer(object, skiff_common::claims::PROTECTION_FINALIZER);
    }

    fn node_writes(&self) -> NodeWrites {
        NodeWrites::ClaimStatus
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        default_claim_spec(spec);
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, old, .. } = *written;
        claim_spec(&object["spec"], "spec", errors);
        if let Some(old) = old {
            claim_update(old, object, errors);
        }
    }
}

/// The access modes a claim may ask for, in upstream's (sorted) order.
const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// A claim spec at `path`, as upstream's ValidatePersistentVolumeClaimSpec:
/// at least one known access mode (ReadWriteOncePod alone), a storage
/// request above zero, and a known volume mode.
fn claim_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let modes = spec["accessModes"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if modes.is_empty() {
        errors.push(FieldError::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for mode in modes {
        let name = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&name) {
            errors.push(FieldError::not_supported(
                format!("{path}.accessModes"),
                mode.clone(),
                ACCESS_MODES,
            ));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        errors.push(FieldError::forbidden(
            format!("{path}.accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    let storage_path = format!("{path}.resources[storage]");
    let storage = &spec["resources"]["requests"]["storage"];
    if storage.is_null() {
        errors.push(FieldError::required(storage_path, ""));
    } else if storage
        .as_str()
        .and_then(Amount::parse)
        .is_some_and(|a| a.milli() <= 0)
    {
        errors.push(FieldError::invalid(
            storage_path,
            storage.clone(),
            "must be greater than zero",
        ));
    }
    crate::validation::one_of(spec, "volumeMode", &["Block", "Filesystem"], path, errors);
}

/// Upstream's words for a change of a claim's spec it does not allow.
const CLAIM_SPEC_RULE: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

/// The beta annotation a claim's class was once named by.
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// What an update of a claim may change, as upstream rules it: a claim's
/// spec is fixed (quota and limits were charged by it) except that the
/// binder names its volume once, a claim without a class may be given one
/// (retroactive default class assignment), and a bound claim's storage
/// request and volume attributes class may change — its request never
/// below the capacity it already has.
fn claim_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let mut was = comparable_claim_spec(&old["spec"]);
    let mut now = comparable_claim_spec(&new["spec"]);
    let (Some(was_map), Some(now_map)) = (was.as_object_mut(), now.as_object_mut()) else {
        return;
    };
    if old["spec"]["volumeName"].as_str().is_none_or(str::is_empty) {
        was_map.remove("volumeName");
        now_map.remove("volumeName");
    }
    let had_beta_class = old["metadata"]["annotations"][BETA_CLASS_ANNOTATION].is_string();
    if !had_beta_class
        && old["spec"]["storageClassName"].is_null()
        && new["spec"]["storageClassName"]
            .as_str()
            .is_some_and(|class| !class.is_empty())
    {
        now_map.remove("storageClassName");
    }
    if new["status"]["phase"] == "Bound" {
        if let Some(requests) = now_map
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            let was_storage = was_map
                .get("resources")
                .and_then(|r| r["requests"].get("storage"));
            match was_storage {
                Some(storage) => requests.insert("storage".into(), storage.clone()),
                None => requests.remove("storage"),
            };
        }
        if now_map.contains_key("volumeAttributesClassName") {
            match was_map.get("volumeAttributesClassName") {
                Some(class) => now_map.insert("volumeAttributesClassName".into(), class.clone()),
                None => now_map.remove("volumeAttributesClassName"),
            };
        }
    }
    if was != now {
        errors.push(FieldError::forbidden("spec", CLAIM_SPEC_RULE));
    }
    let storage = |claim: &Value, path: &[&str]| {
        let at = path.iter().fold(claim, |v, key| &v[*key]);
        at.as_str().and_then(Amount::parse).unwrap_or(Amount::ZERO)
    };
    let requested = ["spec", "resources", "requests", "storage"];
    let new_size = storage(new, &requested);
    if new_size < storage(old, &requested)
        && new_size <= storage(old, &["status", "capacity", "storage"])
    {
        errors.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    // Upstream checks the volume mode on its own too, at this path.
    if old["spec"]["volumeMode"] != new["spec"]["volumeMode"] {
        errors.push(FieldError::invalid(
            "volumeMode",
            new["spec"]["volumeMode"].clone(),
            "field is immutable",
        ));
    }
}

/// A claim spec as upstream's semantic equality sees it: a field set to
/// null is a field not set, and quantities are equal by value (`1Gi` is
/// `1024Mi`).
fn comparable_claim_spec(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.retain(|_, v| !v.is_null());
        for list in ["requests", "limits"] {
            let quantities = map
                .get_mut("resources")
                .and_then(|r| r.get_mut(list))
                .and_then(Value::as_object_mut);
            for quantity in quantities.into_iter().flat_map(|q| q.values_mut()) {
                if let Some(amount) = quantity.as_str().and_then(Amount::parse) {
                    *quantity = json!(amount.milli());
                }
            }
        }
    }
    spec
}

/// A volume's capacity: its storage alone, more than nothing.
fn capacity(capacity: &Value, errors: &mut Vec<FieldError>) {
    let Some(map) = capacity.as_object().filter(|c| !c.is_empty()) else {
        errors.push(FieldError::required("spec.capacity", ""));
        return;
    };
    if !map.contains_key("storage") || map.len() > 1 {
        errors.push(FieldError::not_supported(
            "spec.capacity",
            capacity.clone(),
            &["storage"],
        ));
    }
    for (name, quantity) in map {
        let amount = crate::validation::quantity(quantity);
        if amount.is_some_and(|a| a.milli() <= 0) {
            errors.push(FieldError::invalid(
                format!("spec.capacity[{name}]"),
                quantity.clone(),
                "must be greater than zero",
            ));
        }
    }
}

#[cfg(test)]
mod warning_tests {
    use super::*;

    #[test]
    fn volumes_and_claims_are_warned_of_as_upstream_words_it() {
        let volume = json!({"metadata": {"annotations": {
                "volume.beta.kubernetes.io/storage-class": "", "volume.beta.kubernetes.io/mount-options": ""}},
            "spec": {"persistentVolumeReclaimPolicy": "Recycle", "storageos": {"volumeName": "v"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "beta.kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}});
        assert_eq!(
            volume_warnings(&volume),
            [
                "metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use \"storageClassName\" attribute instead",
                "metadata.annotations[volume.beta.kubernetes.io/mount-options]: deprecated since v1.31; use \"mountOptions\" attribute instead",
                "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.",
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].key: beta.kubernetes.io/os is deprecated since v1.14; use \"kubernetes.io/os\" instead",
                "spec.storageOS: deprecated in v1.22, non-functional in v1.25+",
            ]
        );
        let claim = json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "fast"}},
            "spec": {"resources": {"requests": {"storage": "1.5"}}}});
        assert_eq!(
            claim_warnings(&claim),
            [
                "metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use \"storageClassName\" attribute instead",
                "spec.resources.requests[storage]: fractional byte value \"1500m\" is invalid, must be an integer",
            ]
        );
        assert!(
            claim_warnings(&json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}}))
                .is_empty()
        );
    }
}
