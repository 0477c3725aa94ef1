//! The seccomp and AppArmor profile fields of a pod spec, on the pod and on
//! each container, as upstream validates them: a known type, and a
//! `localhostProfile` exactly when the type is `Localhost`. A seccomp
//! `localhostProfile` names a file below the node's profile directory, so
//! it must be relative and never climb out with `..`.

use serde_json::Value;

use crate::status::FieldError;

const TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];

/// Longest AppArmor profile name the kernel takes (PATH_MAX - 1).
const MAX_APPARMOR_NAME: usize = 4095;

/// Checks the profiles of the pod spec at `path`.
pub(crate) fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let mut contexts = vec![(format!("{path}.securityContext"), &spec["securityContext"])];
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            contexts.push((
                format!("{path}.{list}[{i}].securityContext"),
                &c["securityContext"],
            ));
        }
    }
    for (at, context) in contexts {
        let seccomp = &context["seccompProfile"];
        profile(
            seccomp,
            "seccomp",
            &format!("{at}.seccompProfile"),
            errors,
            super::descending_path,
        );
        let apparmor = &context["appArmorProfile"];
        profile(
            apparmor,
            "AppArmor",
            &format!("{at}.appArmorProfile"),
            errors,
            |name, field, errors| {
                if name.trim() != name {
                    errors.push(FieldError::invalid(
                        field,
                        name,
                        "must not be padded with whitespace",
                    ));
                } else if name.len() > MAX_APPARMOR_NAME {
                    errors.push(FieldError::invalid(
                        field,
                        name,
                        format!("must have at most {MAX_APPARMOR_NAME} bytes"),
                    ));
                }
            },
        );
    }
}

/// One profile field at `at` (`kind` names it in the messages): a known
/// type; a `localhostProfile` set exactly for `Localhost`, and then held
/// to `local_name`'s own rule.
fn profile(
    profile: &Value,
    kind: &str,
    at: &str,
    errors: &mut Vec<FieldError>,
    local_name: impl Fn(&str, &str, &mut Vec<FieldError>),
) {
    if !profile.is_object() {
        return;
    }
    let local = &profile["localhostProfile"];
    let field = format!("{at}.localhostProfile");
    match profile["type"].as_str().unwrap_or_default() {
        "Localhost" => match local.as_str().unwrap_or_default() {
            "" => errors.push(FieldError::required(
                field,
                format!("must be set when {kind} type is Localhost"),
            )),
            name => local_name(name, &field, errors),
        },
        "RuntimeDefault" | "Unconfined" => {
            if !local.is_null() {
                errors.push(FieldError::invalid(
                    field,
                    local.clone(),
                    format!("can only be set when {kind} type is Localhost"),
                ));
            }
        }
        "" => errors.push(FieldError::required(
            format!("{at}.type"),
            format!(
                "type is required when {} is set",
                at.rsplit('.').next().unwrap_or(at)
            ),
        )),
        other => errors.push(FieldError::not_supported(
            format!("{at}.type"),
            other,
            &TYPES,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        pod_spec(&spec, "spec", &mut errors);
        errors
            .iter()
            .map(|e| format!("{}: {:?}", e.field, e.kind))
            .collect()
    }

    #[test]
    fn sound_profiles_pass() {
        let spec = json!({
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"},
                                "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-deny"}},
            "containers": [{"name": "c", "securityContext": {
                "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
                "appArmorProfile": {"type": "Unconfined"}}}]});
        assert_eq!(messages(spec), Vec::<String>::new());
    }

    #[test]
    fn a_seccomp_file_may_not_climb_out_of_the_profile_directory() {
        let spec = json!({"containers": [{"name": "c", "securityContext": {
            "seccompProfile": {"type": "Localhost", "localhostProfile": "/../etc/x.json"}}}]});
        let mut errors = Vec::new();
        pod_spec(&spec, "spec", &mut errors);
        let fields: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.detail.as_str()))
            .collect();
        let at = "spec.containers[0].securityContext.seccompProfile.localhostProfile";
        assert_eq!(
            fields,
            [
                (at, "must be a relative path"),
                (at, "must not contain '..'")
            ]
        );
    }

    #[test]
    fn types_and_localhost_names_are_checked_on_pod_and_containers() {
        let spec = json!({
            "securityContext": {"seccompProfile": {"type": "Strict"},
                                "appArmorProfile": {"type": "Localhost"}},
            "initContainers": [{"name": "i", "securityContext": {
                "seccompProfile": {"type": "Unconfined", "localhostProfile": "x.json"}}}],
            "containers": [{"name": "c", "securityContext": {
                "seccompProfile": {"type": "Localhost"},
                "appArmorProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}}},
                           {"name": "d", "securityContext": {
                "appArmorProfile": {"type": "Localhost", "localhostProfile": " padded"}}}]});
        let mut errors = Vec::new();
        pod_spec(&spec, "spec", &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.securityContext.seccompProfile.type",
                "spec.securityContext.appArmorProfile.localhostProfile",
                "spec.initContainers[0].securityContext.seccompProfile.localhostProfile",
                "spec.containers[0].securityContext.seccompProfile.localhostProfile",
                "spec.containers[0].securityContext.appArmorProfile.localhostProfile",
                "spec.containers[1].securityContext.appArmorProfile.localhostProfile",
            ]
        );
        assert!(messages(json!({"containers": [{"name": "c"}]})).is_empty());
    }
}
