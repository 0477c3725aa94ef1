//! Registry credentials for image pulls, as the kubelet finds them: the
//! pod's `imagePullSecrets` (the API server's admission copies its service
//! account's into a pod that names none), each a
//! `kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg` Secret,
//! matched against the image's registry host and path.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use serde::Deserialize;

use crate::runtime::cri_api::AuthConfig;

/// The registry Docker Hub images come from (upstream's normalisation).
const DOCKER_HUB: &str = "docker.io";

/// One entry of a docker config file.
#[derive(Debug, Clone, Default, Deserialize)]
struct DockerEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
    #[serde(default, rename = "identitytoken")]
    identity_token: String,
    #[serde(default, rename = "registrytoken")]
    registry_token: String,
}

#[derive(Debug, Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerEntry>,
}

/// Credentials for registries whose key (`host[:port][/path]`, optionally
/// with a scheme or a `*.` wildcard) matches the image.
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    /// The key as written in the secret, normalised (no scheme, no trailing
    /// slash).
    pub key: String,
    /// What CRI gets.
    pub auth: AuthConfig,
}

/// Reads the credentials of one pull secret; other secret types and
/// malformed content give none.
pub(crate) fn parse_secret(secret: &Secret) -> Vec<Credential> {
    let data = secret.data.clone().unwrap_or_default();
    let entries: BTreeMap<String, DockerEntry> = match secret.type_.as_deref() {
        Some("kubernetes.io/dockerconfigjson") => data
            .get(".dockerconfigjson")
            .and_then(|v| serde_json::from_slice::<DockerConfigJson>(&v.0).ok())
            .map(|c| c.auths)
            .unwrap_or_default(),
        Some("kubernetes.io/dockercfg") => data
            .get(".dockercfg")
            .and_then(|v| serde_json::from_slice(&v.0).ok())
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    entries
        .into_iter()
        .map(|(key, entry)| credential(&key, entry))
        .collect()
}

fn credential(key: &str, mut entry: DockerEntry) -> Credential {
    // `auth` is base64 of "user:password"; it fills missing fields.
    if (entry.username.is_empty() || entry.password.is_empty()) && !entry.auth.is_empty() {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(entry.auth.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        if let Some((user, password)) = decoded.as_deref().and_then(|d| d.split_once(':')) {
            entry.username = user.to_string();
            entry.password = password.to_string();
        }
    }
    let key = normalise_key(key);
    Credential {
        auth: AuthConfig {
            username: entry.username,
            password: entry.password,
            auth: entry.auth,
            // containerd parses this as a URL and drops credentials whose
            // host differs from the one it resolved (`docker.io` resolves to
            // another host): matching is done here, so leave it empty.
            server_address: String::new(),
            identity_token: entry.identity_token,
            registry_token: entry.registry_token,
        },
        key,
    }
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://r.io:5000/x/` →
/// `r.io:5000/x`.
fn normalise_key(key: &str) -> String {
    let key = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let key = key
        .strip_suffix("/v1")
        .or(key.strip_suffix("/v2"))
        .unwrap_or(key);
    match key {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_string()
        }
        other => other.to_string(),
    }
}

/// The registry host and repository path of an image reference, as Docker
/// normalises it (`busybox` → `docker.io`, `library/busybox`).
pub(crate) fn split_image(image: &str) -> (String, String) {
    let name = image.split('@').next().unwrap_or(image);
    // Drop the tag (a colon after the last slash).
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            let host = if first == "index.docker.io" {
                DOCKER_HUB
            } else {
                first
            };
            (host.to_string(), rest.to_string())
        }
        Some(_) => (DOCKER_HUB.to_string(), name.to_string()),
        None => (DOCKER_HUB.to_string(), format!("library/{name}")),
    }
}

/// Whether `key` covers the image at `host`/`path`: same host (a `*.`
/// wildcard matches one label), and the key's path, if any, is a prefix of
/// the image's at a segment boundary.
fn matches(key: &str, host: &str, path: &str) -> bool {
    let (key_host, key_path) = key.split_once('/').unwrap_or((key, ""));
    let host_ok = match key_host.strip_prefix("*.") {
        Some(suffix) => host.split_once('.').is_some_and(|(_, rest)| rest == suffix),
        None => key_host == host,
    };
    host_ok
        && (key_path.is_empty() || path == key_path || path.starts_with(&format!("{key_path}/")))
}

/// The credentials to try for `image`, most specific key first.
pub(crate) fn for_image(credentials: &[Credential], image: &str) -> Vec<AuthConfig> {
    let (host, path) = split_image(image);
    let mut found: Vec<&Credential> = credentials
        .iter()
        .filter(|c| matches(&c.key, &host, &path))
        .collect();
    found.sort_by_key(|c| std::cmp::Reverse(c.key.len()));
    found.into_iter().map(|c| c.auth.clone()).collect()
}

/// The pull secrets `pod` names,
/// read from the API; missing secrets are named in the second list.
pub(crate) async fn load(client: &kube::Client, pod: &Pod) -> (Vec<Credential>, Vec<String>) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.clone().unwrap_or_default();
    let names: Vec<String> = spec
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .collect();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut credentials = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        match secrets.get(&name).await {
            Ok(secret) => credentials.extend(parse_secret(&secret)),
            Err(_) => missing.push(name),
        }
    }
    (credentials, missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(kind: &str, key: &str, json: &str) -> Secret {
        Secret {
            type_: Some(kind.into()),
            data: Some(BTreeMap::from([(
                key.to_string(),
                ByteString(json.as_bytes().to_vec()),
            )])),
            ..Default::default()
        }
    }

    #[test]
    fn images_split_into_registry_and_path_as_docker_does() {
        for (image, registry, path) in [
            ("busybox", "docker.io", "library/busybox"),
            ("me/app:1", "docker.io", "me/app"),
            (
                "registry.example.com:5000/team/app:v1",
                "registry.example.com:5000",
                "team/app",
            ),
            ("localhost/app@sha256:abc", "localhost", "app"),
        ] {
            assert_eq!(
                split_image(image),
                (registry.into(), path.into()),
                "{image}"
            );
        }
    }

    #[test]
    fn dockerconfigjson_auth_field_gives_user_and_password() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let json = format!(r#"{{"auths":{{"https://reg.example.com/v1/":{{"auth":"{auth}"}}}}}}"#);
        let creds = parse_secret(&secret(
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &json,
        ));
        assert_eq!(creds.len(), 1);
        assert_eq!(creds[0].key, "reg.example.com");
        assert_eq!(creds[0].auth.username, "alice");
        assert_eq!(creds[0].auth.password, "s3cret");
    }

    #[test]
    fn legacy_dockercfg_and_other_types() {
        let creds = parse_secret(&secret(
            "kubernetes.io/dockercfg",
            ".dockercfg",
            r#"{"index.docker.io":{"username":"bob","password":"pw"}}"#,
        ));
        assert_eq!(creds[0].key, "docker.io");
        assert_eq!(creds[0].auth.username, "bob");
        assert!(parse_secret(&secret("Opaque", ".dockercfg", "{}")).is_empty());
        assert!(
            parse_secret(&secret(
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                "not json"
            ))
            .is_empty()
        );
    }

    #[test]
    fn credentials_match_host_path_and_wildcards_most_specific_first() {
        let json = r#"{"auths":{
            "reg.example.com":{"username":"host","password":"p"},
            "reg.example.com/team":{"username":"team","password":"p"},
            "*.corp.io":{"username":"wild","password":"p"},
            "docker.io":{"username":"hub","password":"p"}}}"#;
        let creds = parse_secret(&secret(
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            json,
        ));
        let users = |image: &str| -> Vec<String> {
            for_image(&creds, image)
                .into_iter()
                .map(|a| a.username)
                .collect()
        };
        assert_eq!(users("reg.example.com/team/app:1"), vec!["team", "host"]);
        assert_eq!(users("reg.example.com/teamwork/app"), vec!["host"]);
        assert_eq!(users("eu.corp.io/app"), vec!["wild"]);
        assert!(users("a.b.corp.io/app").is_empty());
        assert_eq!(users("busybox:1.36"), vec!["hub"]);
        assert!(users("other.io/app").is_empty());
    }
}
