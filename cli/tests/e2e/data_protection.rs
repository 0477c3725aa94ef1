//! Data protection with real processes and kubectl: Secrets encrypted at
//! rest (`--secrets-encryption`, `skiff secrets-encrypt`), checked by
//! grepping every file of the stopped server's data dir, and certificates
//! that renew near expiry and rotate on request (`skiff certificate
//! rotate`) while kubectl keeps working.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::support::{Kubectl, Server, admin_role_account, assert_contains, skiff_err, skiff_ok};

/// The distinctive value stored in Secrets.
const VALUE: &str = "e2e-distinctive-passphrase-5c1d9";

fn b64(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value)
}

/// The files below `dir` holding `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path);
            }
        }
    }
    found
}

/// Runs `skiff secrets-encrypt <command>` against the server's data dir.
fn secrets_encrypt(server: &Server, command: &str) -> String {
    skiff_ok(&["secrets-encrypt", command], server.data_dir())
}

fn read_password(server: &Server, name: &str) -> String {
    server.kubectl_ok(&["get", "secret", name, "-o", "jsonpath={.data.password}"])
}

/// The names of the keys `status` lists, the active one first.
fn key_names(status: &str) -> Vec<String> {
    status
        .lines()
        .skip_while(|l| !l.starts_with("------"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .filter(|name| name != "Identity")
        .collect()
}

fn assert_nothing_on_disk(server: &Server, needles: &[&str]) {
    for needle in needles {
        let found = files_containing(server.data_dir(), needle);
        assert!(found.is_empty(), "{needle:?} found on disk in {found:?}");
    }
}

#[test]
fn secrets_stay_encrypted_on_disk_through_restarts_and_key_rotation() {
    let mut server = Server::start_with(&["--disable-agent", "--secrets-encryption"]);
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "first",
        &format!("--from-literal=password={VALUE}"),
    ]);
    let status = secrets_encrypt(&server, "status");
    assert_contains(&status, "Encryption Status: Enabled");
    assert_contains(&status, "Current Rotation Stage: reencrypt_finished");
    let first_key = key_names(&status)[0].clone();
    assert!(first_key.starts_with("aescbckey-"), "{status}");

    assert!(server.terminate().success());
    assert_nothing_on_disk(&server, &[VALUE, &b64(VALUE)]);
    let config = server.data_dir().join("cred/encryption-config.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&config)
            .expect("managed key file")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    server.restart();
    assert_eq!(read_password(&server, "first"), b64(VALUE));

    // A new writing key; the Secret written before is stale but readable.
    let rotated = secrets_encrypt(&server, "rotate-keys");
    let keys = key_names(&rotated);
    assert_eq!(keys.len(), 2, "{rotated}");
    assert_eq!(keys[1], first_key);
    assert_contains(&rotated, "reencrypt_required");
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "second",
        &format!("--from-literal=password={VALUE}"),
    ]);

    // A restart between rotation and re-encryption.
    assert!(server.terminate().success());
    server.restart();
    for name in ["first", "second"] {
        assert_eq!(read_password(&server, name), b64(VALUE), "{name}");
    }

    let done = secrets_encrypt(&server, "reencrypt");
    assert_contains(&done, "Current Rotation Stage: reencrypt_finished");
    assert_contains(&done, "Objects Re-encrypted: 1");
    assert_eq!(key_names(&done), [keys[0].clone()], "{done}");

    assert!(server.terminate().success());
    let old_prefix = format!("k8s:enc:aescbc:v1:{first_key}:");
    assert_nothing_on_disk(&server, &[VALUE, &b64(VALUE), &old_prefix]);
    let new_prefix = format!("k8s:enc:aescbc:v1:{}:", keys[0]);
    assert!(!files_containing(&server.data_dir().join("db"), &new_prefix).is_empty());

    server.restart();
    for name in ["first", "second"] {
        assert_eq!(read_password(&server, name), b64(VALUE), "{name}");
    }
    let json = skiff_ok(
        &["secrets-encrypt", "status", "-o", "json"],
        server.data_dir(),
    );
    let status: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(status["stale"], 0, "{status}");
    assert!(status["objects"].as_u64() >= Some(2), "{status}");
}

/// Runs `skiff secrets-encrypt <command>` with another kubeconfig; it must
/// fail, and its error output is returned.
fn secrets_encrypt_refused(server: &Server, kubeconfig: &Path, command: &str) -> String {
    let kubeconfig = kubeconfig.to_str().expect("UTF-8 path");
    skiff_err(
        &["secrets-encrypt", command, "--kubeconfig", kubeconfig],
        server.data_dir(),
    )
}

#[test]
fn only_cluster_admins_reach_the_encryption_keys() {
    let server = Server::start_with(&["--disable-agent", "--secrets-encryption"]);
    // A ServiceAccount that may do anything with Secrets everywhere still
    // may not see or change the keys.
    let kubeconfig = admin_role_account(&server, "operator");
    for (command, verb, path) in [
        ("status", "get", "status"),
        ("rotate-keys", "post", "rotate-keys"),
        ("reencrypt", "post", "reencrypt"),
    ] {
        let err = secrets_encrypt_refused(&server, &kubeconfig, command);
        assert_contains(
            &err,
            &format!(
                "User \"system:serviceaccount:default:operator\" cannot {verb} path \"/v1-skiff/encrypt/{path}\""
            ),
        );
    }
    // Without credentials: asked to authenticate (401), as for any API path.
    let admin: serde_json::Value = serde_json::from_str(
        &server.kubectl_ok(&["config", "view", "--raw", "--minify", "-o", "json"]),
    )
    .expect("kubeconfig as JSON");
    let anonymous = server.data_dir().join("anonymous.kubeconfig");
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "skiff", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "nobody", "context": {"cluster": "skiff", "user": "nobody"}}],
        "current-context": "nobody",
    });
    std::fs::write(&anonymous, config.to_string()).expect("write kubeconfig");
    for command in ["status", "rotate-keys", "reencrypt"] {
        let err = secrets_encrypt_refused(&server, &anonymous, command);
        assert!(err.lines().any(|l| l.trim() == "Unauthorized"), "{err}");
    }
    // Nothing was rotated: one writing key, as at the start.
    let status = secrets_encrypt(&server, "status");
    assert_eq!(key_names(&status).len(), 1, "{status}");
}

/// Serial numbers of the leaf certificates in the data dir.
/// The names and addresses the serving certificate is for.
fn serving_names(dir: &Path) -> Vec<String> {
    let pem = std::fs::read(dir.join("tls/serving.crt")).expect("certificate");
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
    let cert = block.parse_x509().expect("certificate");
    let mut names: Vec<String> = cert
        .subject_alternative_name()
        .expect("SAN extension")
        .map(|san| {
            san.value
                .general_names
                .iter()
                .map(|name| format!("{name:?}"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn serials(dir: &Path) -> Vec<String> {
    ["serving.crt", "admin.crt", "kubelet-client.crt"]
        .iter()
        .map(|file| {
            let pem = std::fs::read(dir.join("tls").join(file)).expect("certificate");
            let (_, block) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
            block
                .parse_x509()
                .expect("certificate")
                .raw_serial_as_string()
        })
        .collect()
}

fn days_left(dir: &Path, file: &str) -> i64 {
    let pem = std::fs::read(dir.join("tls").join(file)).expect("certificate");
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
    let cert = block.parse_x509().expect("certificate");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    (cert.validity().not_after.timestamp() - now) / 86_400
}

#[test]
fn certificates_near_expiry_renew_at_start_and_rotate_on_request() {
    // 30-day leaves are inside the 120-day renewal window.
    let mut server = Server::start_with(&["--disable-agent", "--certificate-lifetime-days", "30"]);
    let dir = server.data_dir().to_path_buf();
    assert!((29..=30).contains(&days_left(&dir, "admin.crt")));
    assert!((3649..=3650).contains(&days_left(&dir, "ca.crt")));
    let ca = std::fs::read(dir.join("tls/ca.crt")).expect("CA");
    let issued = serials(&dir);
    let old_kubeconfig = dir.join("old-kubeconfig.yaml");
    std::fs::copy(server.kubeconfig(), &old_kubeconfig).expect("copy kubeconfig");

    assert!(server.terminate().success());
    server.restart();
    let renewed = serials(&dir);
    for (old, new) in issued.iter().zip(&renewed) {
        assert_ne!(old, new, "renewed at start");
    }
    assert!(server.log().contains("re-issuing certificate"));
    assert_eq!(std::fs::read(dir.join("tls/ca.crt")).expect("CA"), ca);
    server.kubectl_ok(&["get", "namespaces"]);
    // The kubeconfig was rewritten with the renewed admin certificate, and
    // the one handed out before still works: same CA, not expired.
    let kubeconfig = std::fs::read_to_string(server.kubeconfig()).expect("kubeconfig");
    assert_ne!(
        kubeconfig,
        std::fs::read_to_string(&old_kubeconfig).expect("old kubeconfig")
    );
    Kubectl::new(&old_kubeconfig).ok(&["get", "namespaces"]);

    // `skiff certificate rotate` on the stopped server, then a start.
    assert!(server.terminate().success());
    skiff_ok(&["certificate", "rotate"], &dir);
    let rotated = serials(&dir);
    for (old, new) in renewed.iter().zip(&rotated) {
        assert_ne!(old, new, "rotated");
    }
    assert!((364..=365).contains(&days_left(&dir, "serving.crt")));
    let names = serving_names(&dir);
    server.restart();
    // A year left: far from the renewal window, so the start keeps them.
    // The serving certificate names every address of this host, so a start
    // while another test adds or removes a bridge rightly re-issues it —
    // then for other names, never for the same ones.
    let kept = serials(&dir);
    assert_eq!(kept[1..], rotated[1..]);
    if kept[0] != rotated[0] {
        assert_ne!(
            serving_names(&dir),
            names,
            "the serving certificate was re-issued for the same names"
        );
    }
    assert_eq!(std::fs::read(dir.join("tls/ca.crt")).expect("CA"), ca);
    server.kubectl_ok(&["get", "namespaces"]);
    let whoami = server.kubectl_ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(whoami, "system:admin");
}
