//! The restricted checks, on top of baseline: no privilege escalation,
//! every capability dropped (only NET_BIND_SERVICE may come back), only
//! volume types that go through the API's own objects, non-root users and
//! an explicit seccomp profile. Each function is one revision of one
//! upstream check, with upstream's reason and detail; the `_linux`
//! revisions (policy v1.25 on) leave pods that declare `os.name: windows`
//! alone, as those fields do not exist there.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::messages::{containers_phrase, join_quote, pluralize, volumes_phrase};
use super::{Violation, added_capabilities, containers, containers_where, failed_by, is_windows};

/// Every container must set `allowPrivilegeEscalation: false`.
pub(super) fn allow_privilege_escalation(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let bad = containers_where(spec, |c| {
        c.security.and_then(|sc| sc.allow_privilege_escalation) != Some(false)
    });
    failed_by(false, &bad, "allowPrivilegeEscalation != false", |who| {
        format!("{who} must set securityContext.allowPrivilegeEscalation=false")
    })
}

pub(super) fn allow_privilege_escalation_linux(
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    allow_privilege_escalation(meta, spec)
}

/// Every container drops ALL capabilities and adds back at most
/// NET_BIND_SERVICE.
pub(super) fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let missing_drop_all = containers_where(spec, |c| {
        !c.security
            .and_then(|sc| sc.capabilities.as_ref())
            .is_some_and(|caps| caps.drop.iter().flatten().any(|cap| cap == "ALL"))
    });
    let (adding, added) = added_capabilities(spec, |cap| cap == "NET_BIND_SERVICE");
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&added)
        ));
    }
    Violation::listing("unrestricted capabilities", &details, "; ")
}

pub(super) fn capabilities_linux(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    capabilities(meta, spec)
}

/// The name upstream reports a restricted volume's type by; `None` for the
/// allowed types (those backed by API objects, or ephemeral by nature).
fn restricted_type(volume: &Volume) -> Option<&'static str> {
    let allowed = volume.config_map.is_some()
        || volume.csi.is_some()
        || volume.downward_api.is_some()
        || volume.empty_dir.is_some()
        || volume.ephemeral.is_some()
        || volume.image.is_some()
        || volume.persistent_volume_claim.is_some()
        || volume.projected.is_some()
        || volume.secret.is_some();
    if allowed {
        return None;
    }
    let kinds = [
        (volume.host_path.is_some(), "hostPath"),
        (volume.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (
            volume.aws_elastic_block_store.is_some(),
            "awsElasticBlockStore",
        ),
        (volume.git_repo.is_some(), "gitRepo"),
        (volume.nfs.is_some(), "nfs"),
        (volume.iscsi.is_some(), "iscsi"),
        (volume.glusterfs.is_some(), "glusterfs"),
        (volume.rbd.is_some(), "rbd"),
        (volume.flex_volume.is_some(), "flexVolume"),
        (volume.cinder.is_some(), "cinder"),
        (volume.cephfs.is_some(), "cephfs"),
        (volume.flocker.is_some(), "flocker"),
        (volume.fc.is_some(), "fc"),
        (volume.azure_file.is_some(), "azureFile"),
        (volume.vsphere_volume.is_some(), "vsphereVolume"),
        (volume.quobyte.is_some(), "quobyte"),
        (volume.azure_disk.is_some(), "azureDisk"),
        (
            volume.photon_persistent_disk.is_some(),
            "photonPersistentDisk",
        ),
        (volume.portworx_volume.is_some(), "portworxVolume"),
        (volume.scale_io.is_some(), "scaleIO"),
        (volume.storageos.is_some(), "storageos"),
    ];
    Some(
        kinds
            .into_iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, name)| name),
    )
}

/// Only configMap, csi, downwardAPI, emptyDir, ephemeral, image,
/// persistentVolumeClaim, projected and secret volumes.
pub(super) fn volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad_volumes = Vec::new();
    let mut types = BTreeSet::new();
    for volume in spec.volumes.iter().flatten() {
        if let Some(kind) = restricted_type(volume) {
            bad_volumes.push(volume.name.as_str());
            types.insert(kind);
        }
    }
    if bad_volumes.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {}",
            volumes_phrase(&bad_volumes),
            pluralize("uses", "use", bad_volumes.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

/// The pod, or else every container, must set `runAsNonRoot: true`, and
/// nothing may set it to false.
pub(super) fn run_as_non_root(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod_setting = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.run_as_non_root);
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in containers(spec) {
        match c.security.and_then(|sc| sc.run_as_non_root) {
            Some(false) => explicitly_bad.push(c.name.to_string()),
            Some(true) => {}
            None if pod_setting != Some(true) => implicitly_bad.push(c.name.to_string()),
            None => {}
        }
    }
    let reason = "runAsNonRoot != true";
    failed_by(pod_setting == Some(false), &explicitly_bad, reason, |who| {
        format!("{who} must not set securityContext.runAsNonRoot=false")
    })
    .or_else(|| {
        failed_by(false, &implicitly_bad, reason, |who| {
            format!("pod or {who} must set securityContext.runAsNonRoot=true")
        })
    })
}

/// Nothing may set `runAsUser: 0`.
pub(super) fn run_as_user(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod_bad = spec.security_context.as_ref().and_then(|sc| sc.run_as_user) == Some(0);
    let bad = containers_where(spec, |c| {
        c.security.and_then(|sc| sc.run_as_user) == Some(0)
    });
    failed_by(pod_bad, &bad, "runAsUser=0", |who| {
        format!("{who} must not set runAsUser=0")
    })
}

/// The pod, or else every container, must set a seccomp profile of type
/// `RuntimeDefault` or `Localhost`, and nothing may set another type.
pub(super) fn seccomp_profile(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let allowed = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let mut bad_values = BTreeSet::new();
    let (mut pod_set, mut pod_bad) = (false, false);
    if let Some(profile) = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref())
    {
        if allowed(&profile.type_) {
            pod_set = true;
        } else {
            pod_bad = true;
            bad_values.insert(profile.type_.clone());
        }
    }
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in containers(spec) {
        match c.security.and_then(|sc| sc.seccomp_profile.as_ref()) {
            Some(profile) if !allowed(&profile.type_) => {
                explicitly_bad.push(c.name.to_string());
                bad_values.insert(profile.type_.clone());
            }
            Some(_) => {}
            None if !pod_set => implicitly_bad.push(c.name.to_string()),
            None => {}
        }
    }
    failed_by(pod_bad, &explicitly_bad, "seccompProfile", |who| {
        format!(
            "{who} must not set securityContext.seccompProfile.type to {}",
            join_quote(&bad_values)
        )
    })
    .or_else(|| {
        failed_by(false, &implicitly_bad, "seccompProfile", |who| {
            format!(
                "pod or {who} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
            )
        })
    })
}

pub(super) fn seccomp_profile_linux(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if is_windows(spec) {
        return None;
    }
    seccomp_profile(meta, spec)
}
