//! Snapshots with real processes and kubectl, as k3s's `etcd-snapshot`: a
//! snapshot taken while the server runs restores into a new data dir with
//! the data from before it and not after (Secrets readable: the encryption
//! key travels with it; old kubeconfigs work: so does the CA; the join
//! token still authenticates: it travels too, on sled and on etcd); scheduled
//! snapshots with retention; damaged files refused; only cluster admins
//! reach the endpoints.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use super::support::{
    Kubectl, Server, admin_role_account, assert_contains, eventually, skiff_err, skiff_ok,
};

/// A value only the Secret holds.
const VALUE: &str = "e2e-snapshot-passphrase-7f3a2";

fn snapshot_dir(server: &Server) -> PathBuf {
    server.data_dir().join("server/db/snapshots")
}

/// The snapshot files in `dir` whose names start with `prefix`, oldest first.
fn snapshots(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort_by_key(|n| n.rsplit('-').next().and_then(|t| t.parse::<u64>().ok()));
    names
}

/// The server's join token (`K10<CA hash>::server:<secret>`).
fn join_token(server: &Server) -> String {
    std::fs::read_to_string(server.data_dir().join("token"))
        .expect("DATA_DIR/token")
        .trim()
        .to_string()
}

/// The restored server kept the old join token (same file, mode 0600) and
/// accepts its credential, as a joining agent presents it; a made-up one
/// it refuses.
fn the_join_token_still_works(restored: &Server, token: &str) {
    assert_eq!(join_token(restored), token);
    let mode = std::fs::metadata(restored.data_dir().join("token"))
        .expect("token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let (_, credential) = token.split_once("::").expect("K10<hash>::<credential>");
    let server_url = format!("https://127.0.0.1:{}", restored.port);
    let whoami = |credential: &str| {
        Command::new("kubectl")
            .args(["--server", &server_url, "--insecure-skip-tls-verify"])
            .args(["--token", credential, "auth", "whoami", "-o", "json"])
            .env("KUBECONFIG", "/dev/null")
            .output()
            .expect("kubectl")
    };
    let out = whoami(credential);
    assert!(
        out.status.success(),
        "the old join token is refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrong = whoami("server:not-the-secret");
    assert!(
        !wrong.status.success(),
        "a made-up server token is accepted"
    );
}

#[test]
fn a_snapshot_taken_while_running_restores_into_a_new_data_dir() {
    let mut server = Server::start_with(&[
        "--disable-agent",
        "--secrets-encryption",
        "--disable-snapshots",
    ]);
    server.kubectl_ok(&["create", "configmap", "a", "--from-literal=k=before"]);
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "s",
        &format!("--from-literal=password={VALUE}"),
    ]);
    let saved = skiff_ok(&["snapshot", "save"], server.data_dir());
    let name = saved
        .trim()
        .strip_prefix("Snapshot ")
        .and_then(|s| s.strip_suffix(" saved."))
        .unwrap_or_else(|| panic!("unexpected output {saved:?}"))
        .to_string();
    assert!(name.starts_with("on-demand-"), "{name}");
    server.kubectl_ok(&["create", "configmap", "b", "--from-literal=k=after"]);

    let listed = skiff_ok(&["snapshot", "ls"], server.data_dir());
    assert!(listed.starts_with("Name "), "{listed}");
    assert_contains(&listed, &name);
    let file = snapshot_dir(&server).join(&name);
    let mode = std::fs::metadata(&file)
        .expect("snapshot file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The Secret is in the file as the store holds it: encrypted.
    let raw = std::fs::read(&file).unwrap();
    assert!(!raw.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()));

    // Damaged files are refused before anything is written.
    let spare = tempfile::tempdir().unwrap();
    let cut = spare.path().join("cut");
    std::fs::write(&cut, &raw[..raw.len() - 100]).unwrap();
    let flipped = spare.path().join("flipped");
    let mut bad = raw.clone();
    bad[raw.len() / 2] ^= 1;
    std::fs::write(&flipped, &bad).unwrap();
    let untouched = spare.path().join("data");
    for damaged in [&cut, &flipped] {
        let err = skiff_err(
            &["snapshot", "restore", damaged.to_str().unwrap()],
            &untouched,
        );
        assert_contains(&err, "checksum mismatch");
        assert!(
            !untouched.exists(),
            "a refused restore created {untouched:?}"
        );
    }

    // A restore never pulls the store from under a running server.
    let err = skiff_err(
        &["snapshot", "restore", "--force", file.to_str().unwrap()],
        server.data_dir(),
    );
    assert_contains(&err, "in use by a running server");
    server.kubectl_ok(&["get", "configmap", "b"]);

    let old_kubeconfig = server.kubeconfig();
    let token = join_token(&server);
    server.terminate();

    let restored_dir = tempfile::tempdir().unwrap();
    let restored_path = restored_dir.path().to_path_buf();
    let out = skiff_ok(
        &["snapshot", "restore", file.to_str().unwrap()],
        &restored_path,
    );
    assert_contains(&out, "Snapshot restored into");
    // Once there is a store, a second restore is refused.
    let err = skiff_err(
        &["snapshot", "restore", file.to_str().unwrap()],
        &restored_path,
    );
    assert_contains(&err, "already holds a store");

    // No encryption flag: the restored managed configuration keeps it on.
    let mut restored = Server::start_in_dir(restored_dir, &["--disable-agent"]);
    assert_eq!(
        restored.kubectl_ok(&["get", "configmap", "a", "-o", "jsonpath={.data.k}"]),
        "before"
    );
    let password = restored.kubectl_ok(&["get", "secret", "s", "-o", "jsonpath={.data.password}"]);
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(password.trim())
            .unwrap(),
        VALUE.as_bytes()
    );
    let err = restored.kubectl_err(&["get", "configmap", "b"]);
    assert_contains(&err, "configmaps \"b\" not found");
    the_join_token_still_works(&restored, &token);
    // The old server's admin kubeconfig works against the restored one:
    // same CA, same admin certificate.
    let server_url = format!("https://127.0.0.1:{}", restored.port);
    Kubectl::new(&old_kubeconfig).ok(&[
        "--server",
        &server_url,
        "get",
        "configmap",
        "a",
        "-o",
        "name",
    ]);
    // The restored cluster takes writes from its snapshot's revision on.
    restored.kubectl_ok(&["create", "configmap", "c"]);

    // k3s's way back: --cluster-reset restores over the server's own data
    // dir, keeping the store it replaces, and exits.
    restored.terminate();
    skiff_ok(
        &[
            "server",
            "--cluster-reset",
            "--cluster-reset-restore-path",
            file.to_str().unwrap(),
        ],
        restored.data_dir(),
    );
    let kept = std::fs::read_dir(restored.data_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("db-old-"))
        .count();
    assert_eq!(kept, 1, "the replaced store is kept aside");
    restored.restart();
    restored.kubectl_ok(&["get", "configmap", "a"]);
    let err = restored.kubectl_err(&["get", "configmap", "c"]);
    assert_contains(&err, "not found");
}

#[test]
fn scheduled_snapshots_are_pruned_to_the_retention_and_only_admins_reach_them() {
    let server = Server::start_with(&[
        "--disable-agent",
        "--snapshot-schedule-cron",
        "@every 2s",
        "--snapshot-retention",
        "2",
        "--snapshot-name",
        "scheduled",
    ]);
    let dir = snapshot_dir(&server);
    let on_demand = skiff_ok(&["snapshot", "save", "--name", "kept"], server.data_dir());
    assert_contains(&on_demand, "kept-");

    // Scheduled ones appear every two seconds; the oldest go once more than
    // two are there, other names are left alone.
    let first = eventually(Duration::from_secs(30), "a scheduled snapshot", || {
        snapshots(&dir, "scheduled-").first().cloned()
    });
    eventually(
        Duration::from_secs(30),
        "the first scheduled snapshot pruned",
        || {
            let names = snapshots(&dir, "scheduled-");
            (!names.contains(&first) && names.len() == 2).then_some(())
        },
    );
    assert_eq!(snapshots(&dir, "kept-").len(), 1);

    // An ordinary user, even one allowed everything on Secrets, is refused
    // every snapshot operation, and nothing is written.
    let kubeconfig = admin_role_account(&server, "operator");
    let before = snapshots(&dir, "intruder-");
    for (args, verb, path) in [
        (
            vec!["save", "--name", "intruder"],
            "post",
            "/v1-skiff/snapshots",
        ),
        (vec!["ls"], "get", "/v1-skiff/snapshots"),
        (
            vec!["delete", first.as_str()],
            "delete",
            &*format!("/v1-skiff/snapshots/{first}"),
        ),
        (
            vec!["prune", "--name", "kept"],
            "post",
            "/v1-skiff/snapshot-prune",
        ),
    ] {
        let mut full = vec!["snapshot"];
        full.extend(&args);
        full.extend(["--kubeconfig", kubeconfig.to_str().unwrap()]);
        let err = skiff_err(&full, server.data_dir());
        assert!(
            err.contains(&format!(
                "User \"system:serviceaccount:default:operator\" cannot {verb} path \"{path}\""
            )),
            "{args:?}: {err}"
        );
    }
    assert_eq!(snapshots(&dir, "intruder-"), before);
    assert_eq!(snapshots(&dir, "kept-").len(), 1);

    // The admin prunes on demand and deletes by name.
    let kept = snapshots(&dir, "kept-").remove(0);
    let out = skiff_ok(
        &[
            "snapshot",
            "prune",
            "--name",
            "kept",
            "--snapshot-retention",
            "0",
        ],
        server.data_dir(),
    );
    assert_contains(&out, &format!("Snapshot {kept} deleted."));
    let err = skiff_err(
        &["snapshot", "delete", "no-such-snapshot"],
        server.data_dir(),
    );
    assert_contains(&err, "not found");
}

#[test]
fn a_snapshot_of_a_server_on_etcd_restores_into_the_embedded_store() {
    let etcd_dir = tempfile::tempdir().unwrap();
    let etcd = skiff_store::testing::EtcdProcess::start(etcd_dir.path())
        .unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"));
    let mut server = Server::start_with(&[
        "--disable-agent",
        "--disable-cluster-dns",
        "--disable-snapshots",
        "--datastore-endpoint",
        etcd.endpoint(),
    ]);
    server.kubectl_ok(&["create", "configmap", "on-etcd", "--from-literal=k=v"]);
    let saved = skiff_ok(&["snapshot", "save", "--name", "etcd"], server.data_dir());
    assert_contains(&saved, "etcd-");
    server.kubectl_ok(&["create", "configmap", "later"]);
    let file = snapshots(&snapshot_dir(&server), "etcd-").remove(0);
    let file = snapshot_dir(&server).join(file);
    let token = join_token(&server);
    server.terminate();

    let restored_dir = tempfile::tempdir().unwrap();
    skiff_ok(
        &["snapshot", "restore", file.to_str().unwrap()],
        restored_dir.path(),
    );
    let restored =
        Server::start_in_dir(restored_dir, &["--disable-agent", "--disable-cluster-dns"]);
    assert_eq!(
        restored.kubectl_ok(&["get", "configmap", "on-etcd", "-o", "jsonpath={.data.k}"]),
        "v"
    );
    let err = restored.kubectl_err(&["get", "configmap", "later"]);
    assert_contains(&err, "not found");
    the_join_token_still_works(&restored, &token);
}
