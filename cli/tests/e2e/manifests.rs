//! Auto-deployed manifests (`DATA_DIR/server/manifests`, as k3s's): a file
//! present at start and one added later are applied by server-side apply
//! as `skiff-deploy`, a changed file again; a `.skip` twin turns a file off;
//! a broken file is reported as an Event and in the log without holding up
//! the others; removing a file leaves its objects.

use std::time::Duration;

use super::support::{Server, assert_contains, eventually, field_pairs};

fn config_map(server: &Server, namespace: &str, name: &str) -> Option<serde_json::Value> {
    let out = server.kubectl(&[
        "get",
        "configmap",
        name,
        "-n",
        namespace,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
}

#[test]
fn manifests_directory_is_applied_at_start_and_on_change() {
    let dir = tempfile::tempdir().expect("temp data dir");
    let manifests = dir.path().join("server/manifests");
    std::fs::create_dir_all(&manifests).expect("manifests dir");
    let write = |name: &str, text: &str| {
        // Through a rename, so the server never reads half a file.
        let tmp = manifests.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, manifests.join(name)).expect("rename manifest");
    };
    write(
        "at-start.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deploy-a\ndata:\n  v: \"1\"\n\
         ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deploy-b\n  namespace: default\n",
    );
    write(
        "broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n",
    );
    write(
        "unknown.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n",
    );
    write(
        "skipped.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deploy-skipped\n",
    );
    write("skipped.yaml.skip", "");
    let server = Server::start_in_dir(dir, &["--disable-agent"]);

    // Objects without a namespace land in kube-system, as k3s puts them.
    let a = eventually(Duration::from_secs(30), "deploy-a applied", || {
        config_map(&server, "kube-system", "deploy-a")
    });
    assert_eq!(a["data"]["v"], "1");
    let managers = field_pairs(&a["metadata"]["managedFields"], "manager", "operation");
    assert_eq!(
        managers,
        [("skiff-deploy".to_string(), "Apply".to_string())]
    );
    assert!(config_map(&server, "default", "deploy-b").is_some());
    // One pass looked at every file: the skipped one stays out.
    assert!(config_map(&server, "kube-system", "deploy-skipped").is_none());

    // The broken files are reported, each as an Event about its Addon.
    let events = eventually(
        Duration::from_secs(30),
        "ApplyManifestFailed events",
        || {
            let list: serde_json::Value = serde_json::from_str(&server.kubectl_ok(&[
                "get",
                "events",
                "-n",
                "kube-system",
                "-o",
                "json",
            ]))
            .expect("JSON");
            let failed: Vec<serde_json::Value> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["reason"] == "ApplyManifestFailed")
                .cloned()
                .collect();
            (failed.len() >= 2).then_some(failed)
        },
    );
    let about = |name: &str| {
        events
            .iter()
            .find(|e| e["involvedObject"]["name"] == name)
            .unwrap_or_else(|| panic!("no event about {name}: {events:?}"))
    };
    let broken = about("broken");
    assert_eq!(broken["type"], "Warning");
    assert_eq!(broken["involvedObject"]["kind"], "Addon");
    assert!(
        broken["message"]
            .as_str()
            .is_some_and(|m| m.contains("broken.yaml: document 1")),
        "{broken}"
    );
    assert!(
        about("unknown")["message"]
            .as_str()
            .is_some_and(|m| m.contains("Gadget")),
        "{events:?}"
    );
    assert!(server.log().contains("broken.yaml"), "{}", server.log());
    let table = server.kubectl_ok(&["get", "events", "-n", "kube-system"]);
    assert_contains(&table, "addon/broken");

    // A file added later, and a change to one already applied.
    write(
        "later.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deploy-later","namespace":"default"}}"#,
    );
    write(
        "at-start.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deploy-a\ndata:\n  v: \"2\"\n",
    );
    eventually(Duration::from_secs(30), "later.json applied", || {
        config_map(&server, "default", "deploy-later")
    });
    eventually(Duration::from_secs(30), "the changed file applied", || {
        config_map(&server, "kube-system", "deploy-a").filter(|a| a["data"]["v"] == "2")
    });

    // Removing a file does not remove what it made.
    std::fs::remove_file(manifests.join("later.json")).expect("remove");
    std::thread::sleep(Duration::from_secs(5));
    assert!(config_map(&server, "default", "deploy-later").is_some());
}
