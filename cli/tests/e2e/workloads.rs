//! Controllers and scheduler end to end with kubectl, on simulated nodes:
//! deployments roll out, scale, update and roll back; DaemonSets keep a
//! history kubectl lists and rolls back to; jobs complete;
//! deletion propagates; a namespace deletion empties it.

use std::time::Duration;

use super::support::{Server, assert_contains, eventually, json};

fn count(server: &Server, args: &[&str]) -> usize {
    server
        .kubectl_ok(args)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

#[test]
fn deployment_lifecycle_with_kubectl() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "3"]);
    server.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox:1",
        "--replicas=3",
    ]);
    server.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let d = json(&server.kubectl_ok(&["get", "deploy", "web", "-o", "json"]));
    assert_eq!(d["status"]["availableReplicas"], 3);
    let pods = json(&server.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "json"]));
    for pod in pods["items"].as_array().expect("items") {
        assert!(
            pod["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| n.starts_with("sim-node-")),
            "scheduled onto a simulated node: {pod}"
        );
    }

    server.kubectl_ok(&["scale", "deployment", "web", "--replicas=5"]);
    server.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    eventually(Duration::from_secs(30), "5 pods", || {
        (count(&server, &["get", "pods", "-l", "app=web", "-o", "name"]) == 5).then_some(())
    });

    server.kubectl_ok(&["set", "image", "deployment/web", "busybox=busybox:2"]);
    server.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let history = server.kubectl_ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    server.kubectl_ok(&["rollout", "undo", "deployment/web"]);
    server.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let d = json(&server.kubectl_ok(&["get", "deploy", "web", "-o", "json"]));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "busybox:1",
        "undo restores the previous template"
    );
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    eventually(Duration::from_secs(30), "old pods replaced", || {
        let pods = json(&server.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "json"]));
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 5
            && items
                .iter()
                .all(|p| p["spec"]["containers"][0]["image"] == "busybox:1"))
        .then_some(())
    });

    // Background deletion: the ReplicaSets and pods go with the Deployment.
    server.kubectl_ok(&["delete", "deployment", "web", "--timeout=30s"]);
    eventually(Duration::from_secs(30), "dependents collected", || {
        (count(&server, &["get", "rs,pods", "-l", "app=web", "-o", "name"]) == 0).then_some(())
    });
}

/// The revision number and hash label of each ControllerRevision of `ds`,
/// by the image it stores.
fn daemonset_revisions(server: &Server) -> Vec<(String, i64, String)> {
    let list =
        json(&server.kubectl_ok(&["get", "controllerrevisions", "-l", "app=ds", "-o", "json"]));
    let mut revisions: Vec<(String, i64, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| {
            let image = r["data"]["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let hash = r["metadata"]["labels"]["controller-revision-hash"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert_eq!(r["metadata"]["name"], format!("ds-{hash}"), "{r}");
            assert_eq!(r["metadata"]["ownerReferences"][0]["name"], "ds", "{r}");
            (image, r["revision"].as_i64().unwrap_or_default(), hash)
        })
        .collect();
    revisions.sort();
    revisions
}

#[test]
fn daemonset_history_and_undo_with_kubectl() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "2"]);
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
            "spec": {"selector": {"matchLabels": {"app": "ds"}},
                     "template": {"metadata": {"labels": {"app": "ds"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}"#,
    );
    server.kubectl_ok(&["rollout", "status", "ds/ds", "--timeout=60s"]);
    server.kubectl_ok(&["set", "image", "ds/ds", "c=busybox:2"]);
    server.kubectl_ok(&["rollout", "status", "ds/ds", "--timeout=60s"]);

    let history = server.kubectl_ok(&["rollout", "history", "ds/ds"]);
    let revisions: Vec<String> = history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let first = server.kubectl_ok(&["rollout", "history", "ds/ds", "--revision=1"]);
    assert_contains(&first, "busybox:1");
    let revisions = daemonset_revisions(&server);
    assert_eq!(
        revisions
            .iter()
            .map(|(i, n, _)| (i.as_str(), *n))
            .collect::<Vec<_>>(),
        [("busybox:1", 1), ("busybox:2", 2)]
    );

    // Undo puts revision 1's template back; that revision becomes the newest
    // and the pods are replaced by ones labelled with its hash.
    server.kubectl_ok(&["rollout", "undo", "ds/ds"]);
    let ds = json(&server.kubectl_ok(&["get", "ds", "ds", "-o", "json"]));
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:1"
    );
    server.kubectl_ok(&["rollout", "status", "ds/ds", "--timeout=60s"]);
    let revisions = eventually(Duration::from_secs(30), "revision 1 renumbered", || {
        let revisions = daemonset_revisions(&server);
        (revisions
            .iter()
            .map(|(i, n, _)| (i.as_str(), *n))
            .collect::<Vec<_>>()
            == [("busybox:1", 3), ("busybox:2", 2)])
        .then_some(revisions)
    });
    let current_hash = &revisions[0].2;
    eventually(Duration::from_secs(30), "pods of revision 3", || {
        let pods = json(&server.kubectl_ok(&["get", "pods", "-l", "app=ds", "-o", "json"]));
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 2
            && items.iter().all(|p| {
                p["metadata"]["labels"]["controller-revision-hash"] == current_hash.as_str()
                    && p["spec"]["containers"][0]["image"] == "busybox:1"
            }))
        .then_some(())
    });
}

#[test]
fn orphan_and_foreground_deletion() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "2"]);
    server.kubectl_ok(&[
        "create",
        "deployment",
        "keep",
        "--image=busybox:1",
        "--replicas=2",
    ]);
    server.kubectl_ok(&["rollout", "status", "deployment/keep", "--timeout=60s"]);
    server.kubectl_ok(&[
        "delete",
        "deployment",
        "keep",
        "--cascade=orphan",
        "--timeout=30s",
    ]);
    // The ReplicaSet survives without its owner reference.
    let rs = eventually(Duration::from_secs(30), "orphaned ReplicaSet", || {
        let list = json(&server.kubectl_ok(&["get", "rs", "-l", "app=keep", "-o", "json"]));
        list["items"]
            .as_array()
            .and_then(|i| i.first().cloned())
            .filter(|rs| {
                rs["metadata"]["ownerReferences"]
                    .as_array()
                    .is_none_or(|o| o.is_empty())
            })
    });
    let rs_name = rs["metadata"]["name"].as_str().expect("name").to_string();
    assert_eq!(
        count(&server, &["get", "pods", "-l", "app=keep", "-o", "name"]),
        2
    );

    server.kubectl_ok(&[
        "delete",
        "rs",
        &rs_name,
        "--cascade=foreground",
        "--timeout=30s",
    ]);
    eventually(Duration::from_secs(30), "foreground deletion done", || {
        (count(&server, &["get", "rs,pods", "-l", "app=keep", "-o", "name"]) == 0).then_some(())
    });
}

#[test]
fn job_runs_to_completion_and_namespace_deletion_empties_it() {
    let server = Server::start_with(&["--disable-agent", "--simulated-nodes", "2"]);
    server.kubectl_ok(&["create", "namespace", "batch-work"]);
    server.kubectl_ok(&[
        "create",
        "job",
        "once",
        "-n",
        "batch-work",
        "--image=busybox:1",
    ]);
    server.kubectl_ok(&[
        "wait",
        "--for=condition=complete",
        "job/once",
        "-n",
        "batch-work",
        "--timeout=60s",
    ]);
    let job = json(&server.kubectl_ok(&["get", "job", "once", "-n", "batch-work", "-o", "json"]));
    assert_eq!(job["status"]["succeeded"], 1);
    let table = server.kubectl_ok(&["get", "jobs", "-n", "batch-work"]);
    assert!(
        table.contains("Complete") && table.contains("1/1"),
        "{table}"
    );

    // A finished Job with ttlSecondsAfterFinished goes by itself: the Job
    // controller, under its own account, deletes it.
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "brief", "namespace": "batch-work"},
            "spec": {"ttlSecondsAfterFinished": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}"#,
    );
    eventually(Duration::from_secs(60), "the finished Job expired", || {
        let out = server.kubectl(&["get", "job", "brief", "-n", "batch-work"]);
        String::from_utf8_lossy(&out.stderr)
            .contains("NotFound")
            .then_some(())
    });

    server.kubectl_ok(&["create", "configmap", "left", "-n", "batch-work"]);
    server.kubectl_ok(&["delete", "namespace", "batch-work", "--timeout=60s"]);
    let err = server.kubectl_err(&["get", "namespace", "batch-work"]);
    assert_contains(&err, "NotFound");
    let left = server.kubectl_ok(&["get", "configmaps,jobs,pods", "-A", "-o", "name"]);
    assert!(
        !left.contains("once") && !left.contains("configmap/left"),
        "{left}"
    );
}
