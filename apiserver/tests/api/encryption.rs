//! Encryption at rest through the API: what the store holds (raw values and
//! the files of its directory) against what clients read, list and watch;
//! key rotation and re-encryption through the admin endpoints; who may call
//! them.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::{Authenticated, Authenticator, UserInfo};
use skiff_apiserver::encryption::{EncryptionSource, ProviderKind};
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::Store;

use crate::harness::{Client, Expect, TestServer, bearer, start_error_on, store_in, strings};

/// The distinctive value the tests store in Secrets.
const VALUE: &str = "correct-horse-battery-staple-7f3a";

fn b64(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value)
}

fn secret(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
        "data": {"password": b64(value)}})
}

fn config_file(dir: &Path, resources: &[&str]) -> PathBuf {
    let path = dir.join("encryption.yaml");
    let resources = resources.join(", ");
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [{resources}]\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n      - identity: {{}}\n"
        ),
    )
    .unwrap();
    path
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Whether any file below `dir` holds `needle`.
fn files_contain(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if std::fs::read(&path).is_ok_and(|bytes| contains(&bytes, needle)) {
                found.push(path);
            }
        }
    }
    found
}

/// The default configuration, encrypting `resources` as an encryption
/// configuration file in `dir` says.
fn encrypting_file(dir: &Path, resources: &[&str]) -> ApiServerConfig {
    ApiServerConfig {
        encryption: Some(EncryptionSource::File(config_file(dir, resources))),
        ..ApiServerConfig::default()
    }
}

async fn raw_value(server: &TestServer, key: &str) -> Vec<u8> {
    server.store.get(key).await.unwrap().unwrap().value.to_vec()
}

#[tokio::test]
async fn secrets_are_ciphertext_in_the_store_and_plaintext_to_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::with_config(encrypting_file(dir.path(), &["secrets"])).await;
    let mut watch = server
        .watch("/api/v1/namespaces/default/secrets?watch=1&resourceVersion=0")
        .await;
    let created = server
        .created("/api/v1/namespaces/default/secrets", secret("s1", VALUE))
        .await;
    assert_eq!(created["data"]["password"], b64(VALUE));
    server.configmap("default", "plain", json!({})).await;

    let raw = raw_value(&server, "/registry/core/secrets/default/s1").await;
    assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:key1:"), "{raw:?}");
    assert!(!contains(&raw, VALUE) && !contains(&raw, &b64(VALUE)));
    assert!(!contains(&raw, "\"password\""));
    let cm = raw_value(&server, "/registry/core/configmaps/default/plain").await;
    assert!(
        cm.starts_with(b"{"),
        "ConfigMaps are not configured: stored as JSON"
    );

    let (_, got) = server.get("/api/v1/namespaces/default/secrets/s1").await;
    assert_eq!(got["data"]["password"], b64(VALUE));
    let (_, listed) = server.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(listed["items"][0]["data"]["password"], b64(VALUE));
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["data"]["password"], b64(VALUE));

    // An update's old and new values are both ciphertext in the history.
    let mut changed = got.clone();
    changed["data"]["password"] = json!(b64("second-value-91bc"));
    server
        .put_ok("/api/v1/namespaces/default/secrets/s1", changed)
        .await;
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(
        event["object"]["data"]["password"],
        b64("second-value-91bc")
    );
    let mut history = server.store.watch("/registry/core/secrets/", 0).unwrap();
    use futures::StreamExt;
    for _ in 0..2 {
        let event = history.next().await.unwrap().unwrap();
        assert!(event.kv.value.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        if let Some(prev) = event.prev {
            assert!(prev.value.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        }
    }
}

#[tokio::test]
async fn a_watch_resumed_past_the_caches_history_reads_plaintext_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::with_config(ApiServerConfig {
        watch_history: 2,
        ..encrypting_file(dir.path(), &["secrets"])
    })
    .await;
    let mut first = Value::Null;
    for i in 0..4 {
        let created = server
            .created(
                "/api/v1/namespaces/default/secrets",
                secret(&format!("s{i}"), VALUE),
            )
            .await;
        if i == 0 {
            first = created;
        }
    }
    let (code, body) = server.delete("/api/v1/namespaces/default/secrets/s0").await;
    assert!(code.is_success(), "{body}");
    // The cache keeps two events, so this resume reads the store's history,
    // which holds ciphertext only.
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = server
        .watch(&format!(
            "/api/v1/namespaces/default/secrets?watch=1&resourceVersion={rv}"
        ))
        .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        let event = watch.next().await.unwrap();
        assert_eq!(event["object"]["data"]["password"], b64(VALUE), "{event}");
        seen.push(format!(
            "{} {}",
            event["type"].as_str().unwrap(),
            event["object"]["metadata"]["name"].as_str().unwrap()
        ));
    }
    assert_eq!(seen, ["ADDED s1", "ADDED s2", "ADDED s3", "DELETED s0"]);
}

/// A list at an exact past resourceVersion reads the store's history,
/// which holds ciphertext only: clients still get plaintext.
#[tokio::test]
async fn an_exact_list_of_a_past_state_reads_plaintext_from_the_stores_history() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::with_config(encrypting_file(dir.path(), &["secrets"])).await;
    let secrets = "/api/v1/namespaces/default/secrets";
    server.created(secrets, secret("old", VALUE)).await;
    let then = server.store.current_revision();
    let (code, body) = server.delete(&format!("{secrets}/old")).await;
    assert!(code.is_success(), "{body}");
    server.created(secrets, secret("new", "other")).await;
    let past = server
        .get_ok(&format!(
            "{secrets}?resourceVersion={then}&resourceVersionMatch=Exact"
        ))
        .await;
    let items = past["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{past}");
    assert_eq!(items[0]["metadata"]["name"], "old");
    assert_eq!(items[0]["data"]["password"], b64(VALUE));
}

#[tokio::test]
async fn any_resource_the_configuration_names_is_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        TestServer::with_config(encrypting_file(dir.path(), &["secrets", "configmaps"])).await;
    let cm = server.configmap("default", "enc", json!({})).await;
    let raw = raw_value(&server, "/registry/core/configmaps/default/enc").await;
    assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
    let (_, got) = server
        .get("/api/v1/namespaces/default/configmaps/enc")
        .await;
    assert_eq!(got["data"], cm["data"]);
    // Namespaces are not named: still plaintext.
    let ns = raw_value(&server, "/registry/core/namespaces/default").await;
    assert!(ns.starts_with(b"{"));
}

/// A server over the store in `dir/store` with the managed configuration
/// in `dir/cred/`; the caller keeps `dir` across restarts.
async fn managed_server(dir: &Path, encrypted: bool) -> TestServer {
    let store = crate::harness::open_store(dir.join("store")).await;
    let config = ApiServerConfig {
        encryption: encrypted.then(|| EncryptionSource::Managed {
            path: dir.join(skiff_apiserver::encryption::MANAGED_CONFIG),
            provider: ProviderKind::AesCbc,
        }),
        ..ApiServerConfig::default()
    };
    let server = ApiServer::new(store.clone(), config).await.unwrap();
    TestServer::wrap(server, store)
}

async fn stop(server: TestServer) {
    server.server.shutdown();
    server.store.close().await.unwrap();
    drop(server);
}

async fn status(server: &TestServer) -> Value {
    server.get_ok("/v1-skiff/encrypt/status").await
}

#[tokio::test]
async fn rotation_and_reencryption_keep_secrets_readable_and_leave_no_old_data() {
    let dir = tempfile::tempdir().unwrap();
    // Secrets from before encryption was turned on are plaintext.
    let server = managed_server(dir.path(), false).await;
    server
        .created(
            "/api/v1/namespaces/default/secrets",
            secret("before", VALUE),
        )
        .await;
    assert!(status(&server).await["enabled"] == false);
    stop(server).await;
    let store_dir = dir.path().join("store");
    assert!(!files_contain(&store_dir, &b64(VALUE)).is_empty());

    // Turned on: the old Secret is stale until re-encrypted, a new one is not.
    let server = managed_server(dir.path(), true).await;
    server
        .created("/api/v1/namespaces/default/secrets", secret("after", VALUE))
        .await;
    let before = status(&server).await;
    assert_eq!(before["enabled"], true);
    assert_eq!(before["mode"], "managed");
    assert_eq!(
        (before["objects"].as_u64(), before["stale"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(before["stage"], "reencrypt_required");
    let first_key = before["keys"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(before["keys"][0]["provider"], "aescbc");
    assert_eq!(before["keys"][0]["active"], true);
    assert_eq!(before["keys"][1]["provider"], "identity");

    // Rotation: a new writing key, the old one still reads.
    let rotated = server
        .call(Method::POST, "/v1-skiff/encrypt/rotate-keys", None)
        .await
        .expect_code(StatusCode::OK);
    let second_key = rotated["keys"][0]["name"].as_str().unwrap().to_string();
    assert_ne!(second_key, first_key);
    assert_eq!(rotated["keys"][1]["name"], first_key.as_str());
    assert_eq!(rotated["stale"], 2);
    let (_, after) = server.get("/api/v1/namespaces/default/secrets/after").await;
    assert_eq!(after["data"]["password"], b64(VALUE));
    server
        .created(
            "/api/v1/namespaces/default/secrets",
            secret("rotated", VALUE),
        )
        .await;
    let raw = raw_value(&server, "/registry/core/secrets/default/rotated").await;
    assert!(raw.starts_with(format!("k8s:enc:aescbc:v1:{second_key}:").as_bytes()));

    // A restart between rotation and re-encryption reads everything.
    stop(server).await;
    let server = managed_server(dir.path(), true).await;
    for name in ["before", "after", "rotated"] {
        let got = server
            .get_ok(&format!("/api/v1/namespaces/default/secrets/{name}"))
            .await;
        assert_eq!(got["data"]["password"], b64(VALUE), "{name}");
    }

    let done = server
        .call(Method::POST, "/v1-skiff/encrypt/reencrypt", None)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(done["rewritten"], 2, "{done}");
    assert_eq!(
        (done["objects"].as_u64(), done["stale"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(done["stage"], "reencrypt_finished");
    // The retired key decrypts nothing any more and is dropped.
    let names: Vec<&str> = strings(&done["keys"], "name");
    assert_eq!(names, [second_key.as_str(), ""]);
    for name in ["before", "after", "rotated"] {
        let raw = raw_value(&server, &format!("/registry/core/secrets/default/{name}")).await;
        assert!(raw.starts_with(format!("k8s:enc:aescbc:v1:{second_key}:").as_bytes()));
    }
    stop(server).await;

    // Nothing of the plaintext or the first key's values is left on disk.
    assert_eq!(
        files_contain(&store_dir, &b64(VALUE)),
        Vec::<PathBuf>::new()
    );
    assert_eq!(files_contain(&store_dir, VALUE), Vec::<PathBuf>::new());
    let old_prefix = format!("k8s:enc:aescbc:v1:{first_key}:");
    assert_eq!(
        files_contain(&store_dir, &old_prefix),
        Vec::<PathBuf>::new()
    );
    let config = std::fs::read_to_string(dir.path().join("cred/encryption-config.json")).unwrap();
    assert!(!config.contains(&format!("\"{first_key}\"")), "{config}");

    let server = managed_server(dir.path(), true).await;
    let (_, listed) = server.get("/api/v1/namespaces/default/secrets").await;
    let values: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["data"]["password"])
        .collect();
    assert_eq!(values.len(), 3);
    assert!(values.iter().all(|v| **v == json!(b64(VALUE))));
}

#[tokio::test]
async fn a_forgotten_flag_keeps_a_managed_cluster_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let chosen = EncryptionSource::from_flags(dir.path(), true, ProviderKind::AesCbc, None);
    assert!(matches!(chosen, Some(EncryptionSource::Managed { .. })));
    let server = managed_server(dir.path(), true).await;
    stop(server).await;
    let again = EncryptionSource::from_flags(dir.path(), false, ProviderKind::AesCbc, None);
    assert_eq!(again, chosen);
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        EncryptionSource::from_flags(other.path(), false, ProviderKind::AesCbc, None),
        None
    );
}

#[tokio::test]
async fn rotation_needs_a_managed_configuration_and_encryption() {
    let dir = tempfile::tempdir().unwrap();
    let file = TestServer::with_config(encrypting_file(dir.path(), &["secrets"])).await;
    file.call(Method::POST, "/v1-skiff/encrypt/rotate-keys", None)
        .await
        .expect_mentions(400, "BadRequest", &["--encryption-provider-config"]);
    file.call(Method::POST, "/v1-skiff/encrypt/reencrypt", None)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(status(&file).await["mode"], "file");

    let off = TestServer::new().await;
    assert_eq!(status(&off).await["enabled"], false);
    off.call(Method::POST, "/v1-skiff/encrypt/reencrypt", None)
        .await
        .expect_mentions(400, "BadRequest", &["--secrets-encryption"]);
}

#[tokio::test]
async fn a_server_whose_keys_cannot_read_its_secrets_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    {
        let config = encrypting_file(dir.path(), &["secrets"]);
        let server = ApiServer::new(store.clone(), config).await.unwrap();
        let server = TestServer::wrap(server, store.clone());
        server
            .created("/api/v1/namespaces/default/secrets", secret("s", VALUE))
            .await;
        server.server.shutdown();
    }
    // The key is replaced by another of the same name: nothing decrypts.
    let path = dir.path().join("other.yaml");
    std::fs::write(
        &path,
        std::fs::read_to_string(dir.path().join("encryption.yaml"))
            .unwrap()
            .replace(
                "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
                "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=",
            ),
    )
    .unwrap();
    let config = ApiServerConfig {
        encryption: Some(EncryptionSource::File(path)),
        ..ApiServerConfig::default()
    };
    let err = start_error_on(store.clone(), config).await.to_string();
    assert!(err.contains("/registry/core/secrets/default/s"), "{err}");
    assert!(err.contains("cannot decrypt"), "{err}");
}

/// The admin endpoints with the verbs RBAC checks for them.
const ENDPOINTS: [(Method, &str, &str); 3] = [
    (Method::GET, "/v1-skiff/encrypt/status", "get"),
    (Method::POST, "/v1-skiff/encrypt/rotate-keys", "post"),
    (Method::POST, "/v1-skiff/encrypt/reencrypt", "post"),
];

/// A ServiceAccount, optionally bound cluster-wide to `cluster_role`, and
/// the identity a token issued for it authenticates as.
async fn service_account_identity(
    server: &TestServer,
    name: &str,
    cluster_role: Option<&str>,
) -> UserInfo {
    server
        .created(
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        )
        .await;
    if let Some(role) = cluster_role {
        server.created(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                json!({"metadata": {"name": format!("{name}-{role}")},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}),
            ).await;
    }
    let issued = server
        .created(
            &format!("/api/v1/namespaces/default/serviceaccounts/{name}/token"),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )
        .await;
    let token = issued["status"]["token"].as_str().unwrap();
    let authn = Authenticator::default()
        .with_service_account_tokens(server.server.service_account_tokens());
    match authn.authenticate(&bearer(token), "/api", None) {
        Authenticated::User(user) => user,
        other => panic!("the token does not authenticate: {other:?}"),
    }
}

#[tokio::test]
async fn only_cluster_admins_may_see_or_change_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let server = managed_server(dir.path(), true).await;
    // Broad rights over resources are not the keys: `admin` and `edit`
    // hold Secrets but no non-resource paths.
    let plain = service_account_identity(&server, "plain", None).await;
    let admin = service_account_identity(&server, "ns-admin", Some("admin")).await;
    let user = UserInfo::new("mallory", ["system:authenticated".to_string()]);
    for caller in [&plain, &admin, &user] {
        for (method, path, verb) in ENDPOINTS {
            let body = server
                .call_with_headers(caller, method, path, None, &[])
                .await
                .expect_failure(403, "Forbidden");
            assert_eq!(
                body["message"],
                format!(
                    "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                    caller.name
                ),
                "{body}"
            );
        }
    }
    // Without credentials the caller is asked to authenticate and learns
    // nothing about the endpoints.
    for (method, path, _) in ENDPOINTS {
        let body = server
            .call_with_headers(&UserInfo::anonymous(), method, path, None, &[])
            .await
            .expect_failure(401, "Unauthorized");
        assert!(body.get("keys").is_none(), "{body}");
    }
    // Nothing rotated or rewritten.
    let before = status(&server).await;
    assert_eq!(before["keys"].as_array().unwrap().len(), 2);
    assert!(before["rewritten"].is_null(), "{before}");

    // cluster-admin (any path) may, as a ServiceAccount too.
    let root = service_account_identity(&server, "root", Some("cluster-admin")).await;
    let body = server
        .call_with_headers(
            &root,
            Method::POST,
            "/v1-skiff/encrypt/rotate-keys",
            None,
            &[],
        )
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body["keys"].as_array().unwrap().len(), 3, "{body}");
}
