//! AppArmor, as upstream's kubelet handles it: which profile a container
//! runs under (its own field, else its beta annotation, else the pod's
//! field), handed to the runtime; and the admission check that refuses a
//! pod asking for any confinement on a host whose kernel has AppArmor off.
//! Such a pod must never run unconfined in silence: it fails before
//! anything of it starts, with upstream's reason and message.

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod};

use crate::runtime::cri_api as api;

/// The pod status's and the event's reason for a refused pod.
pub(crate) const NOT_ADMITTED_REASON: &str = "AppArmor";

/// Where the pre-1.30 API named a container's profile.
const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Whether this host's kernel enforces AppArmor (as runc decides it: the
/// security file system has it and the module says it is enabled).
pub(crate) fn host_enabled() -> bool {
    std::path::Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|flag| flag.starts_with(b"Y"))
}

/// Admits `pod` on a host where AppArmor is `enabled` or not; the refusal
/// is upstream's message.
pub(crate) fn admit(pod: &Pod, enabled: bool) -> Result<(), String> {
    if enabled || !confines(pod) {
        return Ok(());
    }
    Err("Cannot enforce AppArmor: AppArmor is not enabled on the host".into())
}

/// Whether any profile the pod names, on itself, a container or in an
/// annotation, is other than `Unconfined`.
fn confines(pod: &Pod) -> bool {
    let confining = |p: &AppArmorProfile| p.type_ != "Unconfined";
    let spec = pod.spec.as_ref();
    let on_pod = spec
        .and_then(|s| s.security_context.as_ref()?.app_armor_profile.as_ref())
        .is_some_and(confining);
    let on_container = spec.is_some_and(|s| {
        let own = |c: &Container| {
            c.security_context
                .as_ref()
                .and_then(|sc| sc.app_armor_profile.as_ref())
                .is_some_and(confining)
        };
        s.containers.iter().any(own)
            || s.init_containers.iter().flatten().any(own)
            || s.ephemeral_containers.iter().flatten().any(|e| {
                e.security_context
                    .as_ref()
                    .and_then(|sc| sc.app_armor_profile.as_ref())
                    .is_some_and(confining)
            })
    });
    let in_annotation = pod
        .metadata
        .annotations
        .iter()
        .flatten()
        .any(|(key, value)| key.starts_with(ANNOTATION_PREFIX) && value != "unconfined");
    on_pod || on_container || in_annotation
}

/// The profile `container` runs under, if the pod names one.
pub(crate) fn profile(pod: &Pod, container: &Container) -> Option<AppArmorProfile> {
    if let Some(own) = container
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        return Some(own.clone());
    }
    let annotation = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{ANNOTATION_PREFIX}{}", container.name)));
    if let Some(from_annotation) = annotation.and_then(|v| from_annotation(v)) {
        return Some(from_annotation);
    }
    pod.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .app_armor_profile
        .clone()
}

/// The field the beta annotation's value stands for; `None` for a value
/// that names no profile.
fn from_annotation(value: &str) -> Option<AppArmorProfile> {
    let (type_, localhost_profile) = match value {
        "runtime/default" => ("RuntimeDefault", None),
        "unconfined" => ("Unconfined", None),
        _ => (
            "Localhost",
            Some(value.strip_prefix("localhost/")?.to_string()),
        ),
    };
    Some(AppArmorProfile {
        type_: type_.into(),
        localhost_profile,
    })
}

/// What the runtime is told: the profile, and the same in the deprecated
/// string that runtimes before CRI's `apparmor` field read.
pub(crate) fn for_runtime(
    profile: Option<&AppArmorProfile>,
) -> (Option<api::SecurityProfile>, String) {
    use api::security_profile::ProfileType;
    let Some(profile) = profile else {
        return (None, String::new());
    };
    let name = profile.localhost_profile.clone().unwrap_or_default();
    let (profile_type, localhost_ref, deprecated) = match profile.type_.as_str() {
        "Unconfined" => (
            ProfileType::Unconfined,
            String::new(),
            "unconfined".to_string(),
        ),
        "Localhost" => (
            ProfileType::Localhost,
            name.clone(),
            format!("localhost/{name}"),
        ),
        _ => (
            ProfileType::RuntimeDefault,
            String::new(),
            "runtime/default".to_string(),
        ),
    };
    (
        Some(api::SecurityProfile {
            profile_type: profile_type as i32,
            localhost_ref,
        }),
        deprecated,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn container(pod: &Pod, name: &str) -> Container {
        let spec = pod.spec.as_ref().unwrap();
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .unwrap()
            .clone()
    }

    #[test]
    fn a_containers_field_wins_then_its_annotation_then_the_pods_field() {
        let p = pod(json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/b": "localhost/b-profile",
                "container.apparmor.security.beta.kubernetes.io/a": "unconfined"}},
            "spec": {
                "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {"name": "a", "securityContext": {"appArmorProfile":
                        {"type": "Localhost", "localhostProfile": "a-profile"}}},
                    {"name": "b"},
                    {"name": "c"}]}}));
        let type_of = |name: &str| profile(&p, &container(&p, name));
        let a = type_of("a").unwrap();
        assert_eq!(
            (a.type_.as_str(), a.localhost_profile.as_deref()),
            ("Localhost", Some("a-profile"))
        );
        let b = type_of("b").unwrap();
        assert_eq!(
            (b.type_.as_str(), b.localhost_profile.as_deref()),
            ("Localhost", Some("b-profile"))
        );
        assert_eq!(type_of("c").unwrap().type_, "RuntimeDefault");
        let bare = pod(json!({"spec": {"containers": [{"name": "c"}]}}));
        assert_eq!(profile(&bare, &container(&bare, "c")), None);
    }

    #[test]
    fn without_apparmor_on_the_host_only_unconfined_pods_are_admitted() {
        let refused = "Cannot enforce AppArmor: AppArmor is not enabled on the host";
        let asking = [
            json!({"spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                            "containers": [{"name": "c"}]}}),
            json!({"spec": {"containers": [{"name": "c"}],
                            "initContainers": [{"name": "i", "securityContext":
                                {"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}}]}}),
            json!({"metadata": {"annotations": {
                        "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
                   "spec": {"containers": [{"name": "c"}]}}),
        ];
        for p in asking {
            assert_eq!(
                admit(&pod(p.clone()), false),
                Err(refused.to_string()),
                "{p}"
            );
            assert_eq!(admit(&pod(p), true), Ok(()));
        }
        let free = [
            json!({"spec": {"containers": [{"name": "c"}]}}),
            json!({"metadata": {"annotations": {
                        "container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
                   "spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                            "containers": [{"name": "c"}]}}),
        ];
        for p in free {
            assert_eq!(admit(&pod(p.clone()), false), Ok(()), "{p}");
        }
    }

    #[test]
    fn the_runtime_gets_the_profile_in_both_spellings() {
        use api::security_profile::ProfileType;
        let localhost = AppArmorProfile {
            type_: "Localhost".into(),
            localhost_profile: Some("k8s-deny-write".into()),
        };
        let (profile, deprecated) = for_runtime(Some(&localhost));
        let profile = profile.unwrap();
        assert_eq!(profile.profile_type, ProfileType::Localhost as i32);
        assert_eq!(profile.localhost_ref, "k8s-deny-write");
        assert_eq!(deprecated, "localhost/k8s-deny-write");
        let default = AppArmorProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        };
        assert_eq!(for_runtime(Some(&default)).1, "runtime/default");
        assert_eq!(for_runtime(None), (None, String::new()));
    }
}
