//! A pod's volumes and its containers' mounts of them, as upstream's
//! ValidateVolumes and ValidateVolumeMounts: each volume named once with a
//! DNS label and one source; each mount naming one of those volumes at a
//! path of its own, and a `subPath`/`subPathExpr` that stays inside the
//! volume (relative, no `..`), with a known `mountPropagation` that is
//! `Bidirectional` only in a privileged container; the files configMap, secret, downwardAPI and
//! projected volumes write stay inside too, clear of the `..`-named links
//! the agent keeps there. The node checks the resolved path again
//! (symbolic links written by the pod itself), this is the first line.

use serde_json::Value;

use super::names::unique_label;
use crate::status::FieldError;

/// Volume sources in the order upstream checks them: with two set, the
/// second of this order is the one refused.
const SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "quobyte",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "csi",
    "configMap",
    "projected",
    "scaleIO",
    "storageos",
    "ephemeral",
    "image",
];

/// Validates `spec.volumes` (under `path`); the names of the volumes, for
/// the mounts. An emptyDir's `sizeLimit` may not be negative.
pub(crate) fn volumes<'a>(
    spec: &'a Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for (i, volume) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let at = format!("{path}.volumes[{i}]");
        unique_label(
            volume["name"].as_str(),
            &format!("{at}.name"),
            &mut names,
            errors,
        );
        projected_files(volume, &at, errors);
        let size_limit = volume["emptyDir"]["sizeLimit"]
            .as_str()
            .and_then(skiff_common::amount::Amount::parse);
        if size_limit.is_some_and(|limit| limit.milli() < 0) {
            errors.push(FieldError::forbidden(
                format!("{at}.emptyDir.sizeLimit"),
                "SizeLimit field must be a valid resource quantity",
            ));
        }
        let mut set = SOURCES.iter().filter(|s| !volume[**s].is_null());
        match set.next() {
            None => errors.push(FieldError::required(&at, "must specify a volume type")),
            Some(_) => {
                for extra in set {
                    errors.push(FieldError::forbidden(
                        format!("{at}.{extra}"),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
    }
    names
}

/// Validates one container's `volumeMounts` (the container at `at`)
/// against the pod's `volumes`.
pub(crate) fn mounts(container: &Value, volumes: &[&str], at: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{at}.volumeMounts");
    let mut mount_paths: Vec<&str> = Vec::new();
    for (i, mount) in container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let item = format!("{path}[{i}]");
        let name = mount["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            errors.push(FieldError::required(format!("{item}.name"), ""));
        }
        if !volumes.contains(&name) {
            errors.push(FieldError::not_found(format!("{item}.name"), name));
        }
        let mount_path = mount["mountPath"].as_str().unwrap_or_default();
        if mount_path.is_empty() {
            errors.push(FieldError::required(format!("{item}.mountPath"), ""));
        }
        if mount_paths.contains(&mount_path) {
            errors.push(FieldError::invalid(
                format!("{item}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        mount_paths.push(mount_path);
        // Upstream names these two without the mount's index.
        let sub_path = mount["subPath"].as_str().unwrap_or_default();
        if !sub_path.is_empty() {
            super::descending_path(sub_path, &format!("{path}.subPath"), errors);
        }
        let expr = mount["subPathExpr"].as_str().unwrap_or_default();
        if !expr.is_empty() {
            if !sub_path.is_empty() {
                errors.push(FieldError::invalid(
                    format!("{item}.subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            super::descending_path(expr, &format!("{path}.subPathExpr"), errors);
        }
        if let Some(mode) = mount["mountPropagation"].as_str() {
            propagation(mode, container, &format!("{path}.mountPropagation"), errors);
        }
    }
}

/// A mount's `mountPropagation`: one of upstream's three, and
/// `Bidirectional` (the container's mounts reaching the host) only for a
/// privileged container.
fn propagation(mode: &str, container: &Value, field: &str, errors: &mut Vec<FieldError>) {
    const MODES: &[&str] = &["Bidirectional", "HostToContainer", "None"];
    if !MODES.contains(&mode) {
        errors.push(FieldError::not_supported(field, mode, MODES));
    }
    let privileged = container["securityContext"]["privileged"].as_bool() == Some(true);
    if mode == "Bidirectional" && !privileged {
        errors.push(FieldError::forbidden(
            field,
            "Bidirectional mount propagation is available only to privileged containers",
        ));
    }
}

/// An ephemeral container's mounts: as any container's, but never into a
/// part of a volume (upstream forbids `subPath` there).
pub(crate) fn ephemeral_mounts(
    container: &Value,
    volumes: &[&str],
    at: &str,
    errors: &mut Vec<FieldError>,
) {
    mounts(container, volumes, at, errors);
    for (i, mount) in container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for field in ["subPath", "subPathExpr"] {
            if mount[field].as_str().is_some_and(|s| !s.is_empty()) {
                errors.push(FieldError::forbidden(
                    format!("{at}.volumeMounts[{i}].{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
    }
}

/// The files a configMap, secret, downwardAPI or projected volume writes:
/// each item's path stays inside the volume and does not start with `..`
/// (the names the volume's own links use), each mode is a permission.
fn projected_files(volume: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for source in ["configMap", "secret", "downwardAPI", "projected"] {
        mode(
            &volume[source]["defaultMode"],
            &format!("{at}.{source}.defaultMode"),
            errors,
        );
    }
    for source in ["configMap", "secret"] {
        key_paths(&volume[source], &format!("{at}.{source}"), errors);
    }
    field_paths(&volume["downwardAPI"], &format!("{at}.downwardAPI"), errors);
    let sources = volume["projected"]["sources"].as_array();
    for (k, projection) in sources.into_iter().flatten().enumerate() {
        let at = format!("{at}.projected.sources[{k}]");
        for source in ["configMap", "secret"] {
            key_paths(&projection[source], &format!("{at}.{source}"), errors);
        }
        field_paths(
            &projection["downwardAPI"],
            &format!("{at}.downwardAPI"),
            errors,
        );
        let token = &projection["serviceAccountToken"];
        if token.is_object() {
            let path = token["path"].as_str().unwrap_or_default();
            let field = format!("{at}.serviceAccountToken.path");
            if path.is_empty() {
                errors.push(FieldError::required(&field, ""));
            }
            non_reserved(path, &field, errors);
        }
    }
}

/// `items` of keys written to paths (configMap and secret sources).
fn key_paths(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for (j, item) in source["items"].as_array().into_iter().flatten().enumerate() {
        let at = format!("{at}.items[{j}]");
        if item["key"].as_str().is_none_or(str::is_empty) {
            errors.push(FieldError::required(format!("{at}.key"), ""));
        }
        item_path(item, &at, errors);
    }
}

/// `items` of fields written to paths (downwardAPI sources).
fn field_paths(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for (j, item) in source["items"].as_array().into_iter().flatten().enumerate() {
        item_path(item, &format!("{at}.items[{j}]"), errors);
    }
}

fn item_path(item: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let path = item["path"].as_str().unwrap_or_default();
    if path.is_empty() {
        errors.push(FieldError::required(format!("{at}.path"), ""));
    }
    non_reserved(path, &format!("{at}.path"), errors);
    mode(&item["mode"], &format!("{at}.mode"), errors);
}

/// A file's permission bits, when set: 0 to 0777.
fn mode(value: &Value, field: &str, errors: &mut Vec<FieldError>) {
    if let Some(mode) = value.as_i64()
        && !(0..=0o777).contains(&mode)
    {
        errors.push(FieldError::invalid(
            field,
            mode,
            "must be a number between 0 and 0777 (octal), both inclusive",
        ));
    }
}

/// A path inside a volume the agent writes: descending, and not starting
/// with `..` (where the volume keeps its own links).
fn non_reserved(target: &str, field: &str, errors: &mut Vec<FieldError>) {
    super::descending_path(target, field, errors);
    if target.starts_with("..") && !target.starts_with("../") {
        errors.push(FieldError::invalid(
            field,
            target,
            "must not start with '..'",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors_of(spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        let names = volumes(&spec, "spec", &mut errors);
        for (i, c) in spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            mounts(c, &names, &format!("spec.containers[{i}]"), &mut errors);
        }
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn mounts_of_declared_volumes_at_distinct_paths_pass() {
        let spec = json!({
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "c"}}],
            "containers": [{"name": "a", "volumeMounts": [
                {"name": "data", "mountPath": "/data", "subPath": "a/b"},
                {"name": "conf", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
                {"name": "data", "mountPath": "/logs", "subPathExpr": "$(POD_NAME)"},
            ]}],
        });
        assert_eq!(errors_of(spec), Vec::<String>::new());
    }

    #[test]
    fn paths_out_of_the_volume_are_refused_in_upstreams_words() {
        let spec = json!({
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "a", "volumeMounts": [
                {"name": "data", "mountPath": "/a", "subPath": "../../etc"},
                {"name": "data", "mountPath": "/b", "subPath": "/etc"},
                {"name": "data", "mountPath": "/c", "subPath": "x", "subPathExpr": "y/../.."},
                {"name": "data", "mountPath": "/d", "subPath": "a..b/c.."},
            ]}],
        });
        assert_eq!(
            errors_of(spec),
            vec![
                "spec.containers[0].volumeMounts.subPath: Invalid value: \"../../etc\": must not contain '..'",
                "spec.containers[0].volumeMounts.subPath: Invalid value: \"/etc\": must be a relative path",
                "spec.containers[0].volumeMounts[2].subPathExpr: Invalid value: \"y/../..\": subPathExpr and subPath are mutually exclusive",
                "spec.containers[0].volumeMounts.subPathExpr: Invalid value: \"y/../..\": must not contain '..'",
            ]
        );
    }

    #[test]
    fn only_privileged_containers_propagate_mounts_back_to_the_host() {
        let spec = json!({
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "a", "volumeMounts": [
                    {"name": "data", "mountPath": "/a", "mountPropagation": "Bidirectional"},
                    {"name": "data", "mountPath": "/b", "mountPropagation": "HostToContainer"},
                    {"name": "data", "mountPath": "/c", "mountPropagation": "Shared"}
                ]},
                {"name": "b", "securityContext": {"privileged": true}, "volumeMounts": [
                    {"name": "data", "mountPath": "/a", "mountPropagation": "Bidirectional"}
                ]}
            ],
        });
        assert_eq!(
            errors_of(spec),
            vec![
                "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
                "spec.containers[0].volumeMounts.mountPropagation: Unsupported value: \"Shared\": supported values: \"Bidirectional\", \"HostToContainer\", \"None\"",
            ]
        );
    }

    #[test]
    fn files_a_volume_writes_stay_inside_it() {
        let spec = json!({
            "volumes": [
                {"name": "a", "configMap": {"name": "c", "defaultMode": 1000, "items": [
                    {"key": "k", "path": "../../etc/cron.d/x"},
                    {"key": "", "path": "..data", "mode": -1},
                    {"key": "k", "path": "ok/file", "mode": 0o644}
                ]}},
                {"name": "b", "projected": {"sources": [
                    {"secret": {"name": "s", "items": [{"key": "k", "path": "/abs"}]}},
                    {"downwardAPI": {"items": [{"path": "", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"serviceAccountToken": {"path": "..token"}}
                ]}}
            ],
            "containers": [{"name": "c"}],
        });
        assert_eq!(
            errors_of(spec),
            vec![
                "spec.volumes[0].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[0].configMap.items[0].path: Invalid value: \"../../etc/cron.d/x\": must not contain '..'",
                "spec.volumes[0].configMap.items[1].key: Required value",
                "spec.volumes[0].configMap.items[1].path: Invalid value: \"..data\": must not start with '..'",
                "spec.volumes[0].configMap.items[1].mode: Invalid value: -1: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[1].projected.sources[0].secret.items[0].path: Invalid value: \"/abs\": must be a relative path",
                "spec.volumes[1].projected.sources[1].downwardAPI.items[0].path: Required value",
                "spec.volumes[1].projected.sources[2].serviceAccountToken.path: Invalid value: \"..token\": must not start with '..'",
            ]
        );
    }

    #[test]
    fn unknown_volumes_missing_and_repeated_paths_are_refused() {
        let spec = json!({
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "data", "emptyDir": {}, "hostPath": {"path": "/"}},
                {"name": "Bad_Name", "secret": {"secretName": "s"}},
                {"name": "none"},
            ],
            "containers": [{"name": "a", "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "data", "mountPath": "/data"},
                {"name": "missing", "mountPath": "/m"},
                {"name": "data"},
            ]}],
        });
        let errors = errors_of(spec);
        for want in [
            "spec.volumes[1].name: Duplicate value: \"data\"",
            "spec.volumes[1].emptyDir: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[3]: Required value: must specify a volume type",
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique",
            "spec.containers[0].volumeMounts[2].name: Not found: \"missing\"",
            "spec.containers[0].volumeMounts[3].mountPath: Required value",
        ] {
            assert!(
                errors.iter().any(|e| e == want),
                "{want} not in {errors:#?}"
            );
        }
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("spec.volumes[2].name: Invalid value: \"Bad_Name\"")),
            "{errors:#?}"
        );
    }
}
