//! A container's effective security settings, as upstream merges them:
//! its own `securityContext` over the pod's (user, group, runAsNonRoot),
//! the pod's supplemental groups with its `fsGroup`, no new privileges
//! when escalation is refused, the seccomp profile; and the checks made
//! before a container is created (`runAsNonRoot`, a `Localhost` seccomp
//! profile that stays inside the node's profile directory).

use std::path::{Component, Path};

use k8s_openapi::api::core::v1::{Container, Pod, SeccompProfile};

use super::container_events::pod_name;
use crate::runtime::cri_api;

/// What the runtime is told of a container's identity and privileges.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Effective {
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub run_as_non_root: bool,
    pub supplemental_groups: Vec<i64>,
    pub no_new_privs: bool,
    /// The seccomp profile asked for (`RuntimeDefault`, `Unconfined`, or
    /// `Localhost` with a file below the node's profile directory); `None`:
    /// none asked, which the runtime runs unconfined.
    pub seccomp: Option<SeccompProfile>,
}

/// The container's settings over the pod's.
pub(crate) fn effective(pod: &Pod, container: &Container) -> Effective {
    let pod_level = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let own = container.security_context.as_ref();
    let mut supplemental_groups: Vec<i64> = pod_level
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default();
    if let Some(fs_group) = pod_level.and_then(|s| s.fs_group)
        && !supplemental_groups.contains(&fs_group)
    {
        supplemental_groups.insert(0, fs_group);
    }
    Effective {
        run_as_user: own
            .and_then(|s| s.run_as_user)
            .or(pod_level.and_then(|s| s.run_as_user)),
        run_as_group: own
            .and_then(|s| s.run_as_group)
            .or(pod_level.and_then(|s| s.run_as_group)),
        run_as_non_root: own
            .and_then(|s| s.run_as_non_root)
            .or(pod_level.and_then(|s| s.run_as_non_root))
            .unwrap_or(false),
        supplemental_groups,
        no_new_privs: own.and_then(|s| s.allow_privilege_escalation) == Some(false),
        seccomp: own
            .and_then(|s| s.seccomp_profile.as_ref())
            .or(pod_level.and_then(|s| s.seccomp_profile.as_ref()))
            .cloned(),
    }
}

/// Refuses a `Localhost` seccomp profile that names no file, or one outside
/// the node's profile directory (absolute, or climbing out with `..`): the
/// API refuses such pods, and the node does not trust that it did.
pub(crate) fn verify_seccomp(settings: &Effective) -> Result<(), String> {
    let Some(profile) = settings.seccomp.as_ref().filter(|p| p.type_ == "Localhost") else {
        return Ok(());
    };
    let name = profile.localhost_profile.as_deref().unwrap_or_default();
    let inside = !name.is_empty()
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(())
    } else {
        Err(format!(
            "localhost seccomp profile {name:?} must be a relative path without '..'"
        ))
    }
}

/// Refuses to create a container that must not run as root but would, in
/// upstream's words; `image` is what the runtime knows of its image (its
/// user, when the spec names none).
pub(crate) fn verify_non_root(
    pod: &Pod,
    container: &Container,
    settings: &Effective,
    image: Option<&cri_api::Image>,
) -> Result<(), String> {
    if !settings.run_as_non_root {
        return Ok(());
    }
    let who = format!("(pod: {:?}, container: {})", pod_name(pod), container.name);
    if let Some(uid) = settings.run_as_user {
        return if uid == 0 {
            Err(format!(
                "container's runAsUser breaks non-root policy {who}"
            ))
        } else {
            Ok(())
        };
    }
    let image_uid = image.and_then(|i| i.uid.as_ref()).map(|u| u.value);
    let username = image.map(|i| i.username.as_str()).unwrap_or_default();
    match (image_uid, username) {
        (Some(0), _) | (None, "") => Err(format!(
            "container has runAsNonRoot and image will run as root {who}"
        )),
        (Some(_), _) => Ok(()),
        (None, name) => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root {who}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn the_containers_settings_win_over_the_pods() {
        let p = pod(serde_json::json!({
            "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                                "supplementalGroups": [4000], "runAsNonRoot": true,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {"runAsUser": 2000, "allowPrivilegeEscalation": false,
                                                  "seccompProfile": {"type": "Unconfined"}}}
            ]
        }));
        let spec = p.spec.clone().unwrap();
        let a = effective(&p, &spec.containers[0]);
        assert_eq!((a.run_as_user, a.run_as_group), (Some(1000), Some(3000)));
        assert_eq!(a.supplemental_groups, vec![2000, 4000]);
        assert!(a.run_as_non_root && !a.no_new_privs);
        let type_of = |e: &Effective| e.seccomp.as_ref().map(|p| p.type_.clone());
        assert_eq!(type_of(&a).as_deref(), Some("RuntimeDefault"));
        let b = effective(&p, &spec.containers[1]);
        assert_eq!((b.run_as_user, b.run_as_group), (Some(2000), Some(3000)));
        assert!(b.no_new_privs);
        assert_eq!(type_of(&b).as_deref(), Some("Unconfined"));
    }

    #[test]
    fn a_localhost_seccomp_profile_stays_in_the_profile_directory() {
        let with = |name: Option<&str>| Effective {
            seccomp: Some(SeccompProfile {
                type_: "Localhost".into(),
                localhost_profile: name.map(str::to_owned),
            }),
            ..Default::default()
        };
        assert_eq!(verify_seccomp(&with(Some("profiles/audit.json"))), Ok(()));
        for bad in [
            None,
            Some(""),
            Some("/etc/shadow"),
            Some("../../etc/x.json"),
            Some("a/../../b"),
        ] {
            assert!(verify_seccomp(&with(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(verify_seccomp(&Effective::default()), Ok(()));
    }

    #[test]
    fn run_as_non_root_refuses_root_in_upstreams_words() {
        let p = pod(serde_json::json!({"containers": [{"name": "c"}]}));
        let c = &p.spec.clone().unwrap().containers[0];
        let must = |uid| Effective {
            run_as_user: uid,
            run_as_non_root: true,
            ..Default::default()
        };
        assert_eq!(
            verify_non_root(&p, c, &must(Some(0)), None),
            Err(
                "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)"
                    .into()
            )
        );
        assert_eq!(verify_non_root(&p, c, &must(Some(1000)), None), Ok(()));
        let root_image = cri_api::Image::default();
        assert_eq!(
            verify_non_root(&p, c, &must(None), Some(&root_image)),
            Err("container has runAsNonRoot and image will run as root (pod: \"p_ns(u)\", container: c)".into())
        );
        let user_image = cri_api::Image {
            uid: Some(cri_api::Int64Value { value: 65534 }),
            ..Default::default()
        };
        assert_eq!(
            verify_non_root(&p, c, &must(None), Some(&user_image)),
            Ok(())
        );
        let not_checked = Effective::default();
        assert_eq!(verify_non_root(&p, c, &not_checked, None), Ok(()));
    }
}
