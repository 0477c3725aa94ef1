//! The identities and privileges of a pod spec's security contexts, as
//! upstream's validatePodSpecSecurityContext and ValidateSecurityContext
//! rule them: user and group IDs within 0–2147483647; sysctl names of the
//! kernel's form, each once; no process namespace shared with the host's;
//! a known `procMount`; and no privileged container (nor one adding
//! `CAP_SYS_ADMIN`) that also forbids privilege escalation. The seccomp and
//! AppArmor profiles are `security_profiles`'.

use serde_json::Value;

use crate::status::FieldError;

/// Upstream's user and group ID range (`IsValidUserID`, `IsValidGroupID`).
const MAX_ID: i64 = i32::MAX as i64;
/// Longest sysctl name.
const MAX_SYSCTL: usize = 253;
const PROC_MOUNTS: &[&str] = &["Default", "Unmasked"];

/// Checks the pod's security context and each container's, for the pod
/// spec at `path`.
pub(crate) fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let context = &spec["securityContext"];
    let at = format!("{path}.securityContext");
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        id(&context[field], &format!("{at}.{field}"), errors);
    }
    for (g, gid) in context["supplementalGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        id(gid, &format!("{at}.supplementalGroups[{g}]"), errors);
    }
    if spec["shareProcessNamespace"] == true && spec["hostPID"] == true {
        errors.push(FieldError::invalid(
            format!("{at}.shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    sysctls(&context["sysctls"], &format!("{at}.sysctls"), errors);
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            container(
                &c["securityContext"],
                &format!("{path}.{list}[{i}].securityContext"),
                errors,
            );
        }
    }
}

/// A user or group ID, when set.
fn id(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(n) = value.as_i64().filter(|n| !(0..=MAX_ID).contains(n)) {
        errors.push(FieldError::invalid(
            path,
            n,
            format!("must be between 0 and {MAX_ID}, inclusive"),
        ));
    }
}

/// A kernel parameter name: dot- or slash-separated segments of
/// `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`, at most 253 characters.
fn is_sysctl_name(name: &str) -> bool {
    let segment = |s: &str| {
        let bytes = s.as_bytes();
        let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        !bytes.is_empty()
            && bytes.first().is_some_and(inner)
            && bytes.last().is_some_and(inner)
            && bytes.iter().all(|b| inner(b) || *b == b'-' || *b == b'_')
    };
    name.len() <= MAX_SYSCTL && name.split(['.', '/']).all(segment)
}

fn sysctls(list: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let mut seen: Vec<&str> = Vec::new();
    for (i, sysctl) in list.as_array().into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}].name");
        let name = sysctl["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            errors.push(FieldError::required(at, ""));
        } else if !is_sysctl_name(name) {
            errors.push(FieldError::invalid(
                at,
                name,
                format!(
                    "must have at most {MAX_SYSCTL} characters and match regex \
                     ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
                ),
            ));
        } else if seen.contains(&name) {
            errors.push(FieldError::duplicate(at, name));
        } else {
            seen.push(name);
        }
    }
}

/// A container's security context at `path`.
fn container(context: &Value, path: &str, errors: &mut Vec<FieldError>) {
    for field in ["runAsUser", "runAsGroup"] {
        id(&context[field], &format!("{path}.{field}"), errors);
    }
    super::one_of(context, "procMount", PROC_MOUNTS, path, errors);
    if context["allowPrivilegeEscalation"] != false {
        return;
    }
    // Upstream shows the whole context as Go prints its struct; its JSON
    // says the same here.
    if context["privileged"] == true {
        errors.push(
            FieldError::invalid(
                path,
                Value::Null,
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            )
            .shown_as(context.to_string()),
        );
    }
    let adds_sys_admin = context["capabilities"]["add"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c == "CAP_SYS_ADMIN");
    if adds_sys_admin {
        errors.push(
            FieldError::invalid(
                path,
                Value::Null,
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            )
            .shown_as(context.to_string()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(spec: Value) -> Vec<String> {
        crate::validation::rendered(pod_spec, spec)
    }

    #[test]
    fn ids_stay_in_range() {
        assert_eq!(
            rendered(json!({
                "securityContext": {"runAsUser": -1, "fsGroup": 2147483648_i64, "supplementalGroups": [5, -2]},
                "containers": [{"name": "c", "securityContext": {"runAsGroup": -3}}],
            })),
            [
                "spec.securityContext.fsGroup: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
                "spec.containers[0].securityContext.runAsGroup: Invalid value: -3: must be between 0 and 2147483647, inclusive",
            ]
        );
    }

    #[test]
    fn sysctls_have_the_kernels_form_once_each() {
        assert_eq!(
            rendered(json!({"securityContext": {"sysctls": [
                {"name": "net.core.somaxconn", "value": "1"},
                {"name": "bad name", "value": "1"},
                {"name": "net.core.somaxconn", "value": "2"},
                {"name": "", "value": "1"},
                {"name": "net/ipv4/ip_local_port_range", "value": "1"},
            ]}})),
            [
                "spec.securityContext.sysctls[1].name: Invalid value: \"bad name\": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
                "spec.securityContext.sysctls[2].name: Duplicate value: \"net.core.somaxconn\"",
                "spec.securityContext.sysctls[3].name: Required value",
            ]
        );
    }

    #[test]
    fn privilege_and_no_escalation_do_not_mix() {
        let errors = rendered(json!({
            "shareProcessNamespace": true, "hostPID": true,
            "containers": [
                {"name": "a", "securityContext": {"privileged": true, "allowPrivilegeEscalation": false}},
                {"name": "b", "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"add": ["CAP_SYS_ADMIN"]}, "procMount": "Open"}},
                {"name": "c", "securityContext": {"privileged": true, "allowPrivilegeEscalation": true}},
            ],
        }));
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert_eq!(
            errors[0],
            "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"
        );
        assert_eq!(
            errors[1],
            "spec.containers[0].securityContext: Invalid value: {\"allowPrivilegeEscalation\":false,\"privileged\":true}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
        );
        assert!(errors[1].ends_with(
            ": cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
        ));
        assert_eq!(
            errors[2],
            "spec.containers[1].securityContext.procMount: Unsupported value: \"Open\": supported values: \"Default\", \"Unmasked\""
        );
        assert!(errors[3].ends_with(
            "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"
        ));
    }
}
