//! Pod Security admission through the API: a namespace's
//! `pod-security.kubernetes.io/*` labels refuse pods (upstream's 403),
//! warn about them (Warning headers) and audit them (annotations on the
//! response for the audit log); workloads are warned about, never refused;
//! namespace label changes are validated and answered with the existing
//! pods that would fail; exemptions and defaults come from the admission
//! configuration file. Checked from the side of someone trying to get a
//! privileged pod in.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::{ApiServerConfig, ApiServerError};
use skiff_testkit::pod_security::{HOST_POD_RESTRICTED, host_pod};

use super::harness::{
    Answer, Client, TestServer, answer_of, assert_mentions, created_answer, eventually,
    json_request, labelled_namespace, post_answer, start_error,
};

/// Sends `body` as `user` (the admin when `None`) with `content_type`.
async fn send_as(
    ts: &TestServer,
    user: Option<&UserInfo>,
    method: Method,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = json_request(method, path, content_type, body);
    let router = match user {
        Some(user) => {
            request.extensions_mut().insert(user.clone());
            ts.server.router()
        }
        None => ts.router.clone(),
    };
    answer_of(router, request).await
}

/// POSTs `body` as `user`.
async fn post_as(ts: &TestServer, user: &UserInfo, path: &str, body: Value) -> Answer {
    send_as(
        ts,
        Some(user),
        Method::POST,
        path,
        "application/json",
        Some(body),
    )
    .await
}

/// POSTs `body`, which must be refused with a 403.
async fn forbidden(ts: &TestServer, path: &str, body: Value) -> Answer {
    let refused = post_answer(ts, path, body).await;
    refused.assert_status(403, "Forbidden");
    refused
}

/// POSTs `body`, which must be refused with a 403 saying `message`.
async fn forbidden_with(ts: &TestServer, path: &str, body: Value, message: &str) -> Answer {
    let refused = post_answer(ts, path, body).await;
    refused.assert_refused(403, "Forbidden", message);
    refused
}

async fn label(ts: &TestServer, namespace: &str, labels: Value, query: &str) -> Answer {
    send_as(
        ts,
        None,
        Method::PATCH,
        &format!("/api/v1/namespaces/{namespace}{query}"),
        "application/merge-patch+json",
        Some(json!({"metadata": {"labels": labels}})),
    )
    .await
}

/// Pod Security labels, `pod-security.kubernetes.io/<mode>: <level>` for
/// each pair: what every namespace under test is labelled with.
fn psa(modes: &[(&str, &str)]) -> Value {
    modes
        .iter()
        .map(|(mode, level)| (format!("pod-security.kubernetes.io/{mode}"), json!(level)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

async fn namespace(ts: &TestServer, name: &str, labels: Value) -> Answer {
    let namespace = labelled_namespace(name, labels);
    post_answer(ts, "/api/v1/namespaces", namespace).await
}

fn privileged_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}})
}

/// A pod that passes restricted.
fn restricted_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
    "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "busybox", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]
    }})
}

const PRIVILEGED_BASELINE: &str =
    r#"privileged (container "c" must not set securityContext.privileged=true)"#;

#[tokio::test]
async fn enforce_refuses_a_privileged_host_pod_with_upstreams_status() {
    let ts = TestServer::new().await;
    let created = namespace(&ts, "secure", psa(&[("enforce", "restricted")])).await;
    assert_eq!(created.code, StatusCode::CREATED, "{}", created.body);

    let message = format!(
        "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": {HOST_POD_RESTRICTED}"
    );
    let refused = forbidden_with(
        &ts,
        "/api/v1/namespaces/secure/pods",
        host_pod("x"),
        &message,
    )
    .await;
    assert_eq!(
        refused.body["details"],
        json!({"name": "x", "kind": "pods"})
    );
    assert!(refused.warnings.is_empty(), "{:?}", refused.warnings);
    assert!(
        refused.annotations.contains(&(
            "pod-security.kubernetes.io/enforce-policy".into(),
            "restricted:latest".into()
        )),
        "{:?}",
        refused.annotations
    );
    assert!(!ts.keys().await.iter().any(|k| k.contains("/pods/secure/")));

    // A dry run is refused the same way, and generated names too.
    forbidden(
        &ts,
        "/api/v1/namespaces/secure/pods?dryRun=All",
        host_pod("x"),
    )
    .await;
    let mut generated = host_pod("");
    generated["metadata"] = json!({"generateName": "x-"});
    forbidden(&ts, "/api/v1/namespaces/secure/pods", generated).await;

    // A pod that follows the standard goes in.
    let ok = created_answer(
        &ts,
        "/api/v1/namespaces/secure/pods",
        restricted_pod("fine"),
    )
    .await;
    assert!(ok.warnings.is_empty());
}

#[tokio::test]
async fn a_pinned_enforce_version_applies_the_checks_of_that_version() {
    let ts = TestServer::new().await;
    namespace(
        &ts,
        "pinned",
        psa(&[("enforce", "restricted"), ("enforce-version", "v1.22")]),
    )
    .await;
    // runAsUser=0 became a restricted failure at v1.23.
    let mut pod = restricted_pod("root");
    pod["spec"]["securityContext"]["runAsUser"] = json!(0);
    pod["spec"]["securityContext"]["runAsNonRoot"] = json!(null);
    pod["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = json!(true);
    let _created = created_answer(&ts, "/api/v1/namespaces/pinned/pods", pod.clone()).await;

    label(&ts, "pinned", psa(&[("enforce-version", "v1.33")]), "").await;
    pod["metadata"]["name"] = json!("root-2");
    let message = "pods \"root-2\" is forbidden: violates PodSecurity \"restricted:v1.33\": runAsUser=0 (pod must not set runAsUser=0)";
    forbidden_with(&ts, "/api/v1/namespaces/pinned/pods", pod, message).await;
}

#[tokio::test]
async fn warn_answers_with_warning_headers_and_creates_the_pod() {
    let ts = TestServer::new().await;
    namespace(&ts, "loose", psa(&[("warn", "baseline")])).await;
    let created = created_answer(&ts, "/api/v1/namespaces/loose/pods", privileged_pod("p")).await;
    assert_eq!(
        created.warnings,
        [format!(
            "would violate PodSecurity \"baseline:latest\": {PRIVILEGED_BASELINE}"
        )]
    );

    // Enforce baseline and warn restricted: a pod passing baseline only
    // is created with the restricted warning; one failing baseline is
    // refused without warnings.
    namespace(
        &ts,
        "mixed",
        psa(&[("enforce", "baseline"), ("warn", "restricted")]),
    )
    .await;
    let plain = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = created_answer(&ts, "/api/v1/namespaces/mixed/pods", plain).await;
    assert_eq!(
        created.warnings,
        [concat!(
            r#"would violate PodSecurity "restricted:latest": "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )]
    );
    let refused = forbidden(&ts, "/api/v1/namespaces/mixed/pods", privileged_pod("bad")).await;
    assert!(refused.warnings.is_empty(), "{:?}", refused.warnings);
}

#[tokio::test]
async fn audit_violations_are_annotations_for_the_audit_log() {
    let ts = TestServer::new().await;
    namespace(&ts, "watched", psa(&[("audit", "baseline")])).await;
    let created = created_answer(&ts, "/api/v1/namespaces/watched/pods", privileged_pod("p")).await;
    assert!(created.warnings.is_empty());
    assert_eq!(
        created.annotations,
        [
            (
                "pod-security.kubernetes.io/enforce-policy".to_string(),
                "privileged:latest".to_string()
            ),
            (
                "pod-security.kubernetes.io/audit-violations".to_string(),
                format!("would violate PodSecurity \"baseline:latest\": {PRIVILEGED_BASELINE}")
            ),
        ]
    );
}

#[tokio::test]
async fn workload_templates_are_warned_about_never_refused() {
    let ts = TestServer::new().await;
    namespace(
        &ts,
        "apps",
        psa(&[
            ("enforce", "baseline"),
            ("warn", "baseline"),
            ("audit", "baseline"),
        ]),
    )
    .await;
    let template = json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}});
    let mut job_template = template.clone();
    job_template["spec"]["restartPolicy"] = json!("Never");
    let workloads = [
        (
            "/apis/apps/v1/namespaces/apps/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template}}),
        ),
        (
            "/apis/apps/v1/namespaces/apps/daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template}}),
        ),
        (
            "/apis/batch/v1/namespaces/apps/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": job_template}}}}),
        ),
        (
            "/api/v1/namespaces/apps/podtemplates",
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"},
                "template": template}),
        ),
    ];
    let warning = format!("would violate PodSecurity \"baseline:latest\": {PRIVILEGED_BASELINE}");
    for (path, object) in workloads {
        let created = post_answer(&ts, path, object).await;
        assert_eq!(
            created.code,
            StatusCode::CREATED,
            "{path}: {}",
            created.body
        );
        assert_eq!(created.warnings, std::slice::from_ref(&warning), "{path}");
        assert!(
            created
                .annotations
                .iter()
                .any(|(k, v)| k == "pod-security.kubernetes.io/audit-violations" && *v == warning),
            "{path}: {:?}",
            created.annotations
        );
    }
    // Updating one warns again; its scale subresource does not.
    let patched = send_as(
        &ts,
        None,
        Method::PATCH,
        "/apis/apps/v1/namespaces/apps/deployments/d",
        "application/merge-patch+json",
        Some(json!({"metadata": {"labels": {"tier": "web"}}})),
    )
    .await;
    assert_eq!(patched.code, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.warnings, std::slice::from_ref(&warning));
    let scaled = send_as(
        &ts,
        None,
        Method::PATCH,
        "/apis/apps/v1/namespaces/apps/deployments/d/scale",
        "application/merge-patch+json",
        Some(json!({"spec": {"replicas": 3}})),
    )
    .await;
    assert_eq!(scaled.code, StatusCode::OK, "{}", scaled.body);
    assert!(scaled.warnings.is_empty());

    // The pods such a workload would make are refused.
    forbidden(
        &ts,
        "/api/v1/namespaces/apps/pods",
        privileged_pod("from-template"),
    )
    .await;
}

#[tokio::test]
async fn pod_updates_are_checked_only_when_they_change_what_the_checks_see() {
    let ts = TestServer::new().await;
    namespace(&ts, "legacy", json!({})).await;
    let _created =
        created_answer(&ts, "/api/v1/namespaces/legacy/pods", privileged_pod("old")).await;
    label(&ts, "legacy", psa(&[("enforce", "baseline")]), "").await;

    // Labels, annotations and tolerations of a running pod may change.
    let relabeled = send_as(
        &ts,
        None,
        Method::PATCH,
        "/api/v1/namespaces/legacy/pods/old",
        "application/merge-patch+json",
        Some(json!({"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}})),
    )
    .await;
    assert_eq!(relabeled.code, StatusCode::OK, "{}", relabeled.body);

    // A new image is checked, and the pod fails the namespace's level.
    let reimaged = send_as(
        &ts,
        None,
        Method::PATCH,
        "/api/v1/namespaces/legacy/pods/old",
        "application/strategic-merge-patch+json",
        Some(json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})),
    )
    .await;
    reimaged.assert_refused(
        403,
        "Forbidden",
        &format!(
            "pods \"old\" is forbidden: violates PodSecurity \"baseline:latest\": {PRIVILEGED_BASELINE}"
        ),
    );
    let (_, stored) = ts.get("/api/v1/namespaces/legacy/pods/old").await;
    assert_eq!(stored["spec"]["containers"][0]["image"], "busybox");
}

#[tokio::test]
async fn a_stricter_enforce_label_names_the_existing_pods_that_would_fail() {
    let ts = TestServer::new().await;
    namespace(&ts, "legacy", json!({})).await;
    let host_network = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "net"},
        "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "busybox"}]}});
    for pod in [
        privileged_pod("b"),
        privileged_pod("a"),
        host_network,
        restricted_pod("good"),
    ] {
        let _created = created_answer(&ts, "/api/v1/namespaces/legacy/pods", pod).await;
    }
    let want = [
        r#"existing pods in namespace "legacy" violate the new PodSecurity enforce level "baseline:latest""#,
        "a (and 1 other pod): privileged",
        "net: host namespaces",
    ];

    // A server-side dry run previews the warnings and changes nothing.
    let dry = label(
        &ts,
        "legacy",
        psa(&[("enforce", "baseline")]),
        "?dryRun=All",
    )
    .await;
    assert_eq!(dry.code, StatusCode::OK, "{}", dry.body);
    assert_eq!(dry.warnings, want);
    let (_, ns) = ts.get("/api/v1/namespaces/legacy").await;
    assert!(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].is_null());

    let labeled = label(&ts, "legacy", psa(&[("enforce", "baseline")]), "").await;
    assert_eq!(labeled.code, StatusCode::OK, "{}", labeled.body);
    assert_eq!(labeled.warnings, want);
    assert_eq!(
        labeled.body["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "baseline"
    );

    // Relabelling to the same level, relaxing it, or a change that leaves
    // enforce alone says nothing.
    for labels in [
        json!({"pod-security.kubernetes.io/enforce": "baseline", "team": "a"}),
        psa(&[("warn", "restricted")]),
        psa(&[("enforce", "privileged")]),
    ] {
        let quiet = label(&ts, "legacy", labels.clone(), "").await;
        assert_eq!(quiet.code, StatusCode::OK, "{}", quiet.body);
        assert!(quiet.warnings.is_empty(), "{labels}: {:?}", quiet.warnings);
    }
}

#[tokio::test]
async fn labels_pod_security_cannot_read_are_refused_so_enforcement_cannot_be_switched_off() {
    let ts = TestServer::new().await;
    let bad = namespace(&ts, "bad", psa(&[("enforce", "strict")])).await;
    bad.assert_refused(
        422,
        "Invalid",
        "Namespace \"bad\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
    );
    assert_eq!(
        bad.body["details"]["causes"][0]["field"],
        "metadata.labels[pod-security.kubernetes.io/enforce]"
    );

    namespace(&ts, "secure", psa(&[("enforce", "restricted")])).await;
    // Replacing the level or the version with garbage does not turn the
    // check off: the write is refused and the namespace keeps its policy.
    for labels in [
        psa(&[("enforce", "off")]),
        psa(&[("enforce-version", "1.33")]),
        psa(&[("warn", "loud")]),
    ] {
        let refused = label(&ts, "secure", labels.clone(), "").await;
        refused.assert_status(422, "Invalid");
    }
    forbidden(&ts, "/api/v1/namespaces/secure/pods", privileged_pod("p")).await;
}

/// A server with `--admission-control-config-file` holding `psa`.
async fn configured(psa: &str) -> (TestServer, tempfile::TempDir) {
    let (config, dir) = admission_config(psa);
    (TestServer::with_config(config).await, dir)
}

/// `--admission-control-config-file` holding `psa` as PodSecurity's
/// configuration, in a directory the caller keeps.
fn admission_config(psa: &str) -> (ApiServerConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admission.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n{}",
            psa.lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        ),
    )
    .unwrap();
    let config = ApiServerConfig {
        admission_control_config_file: Some(file),
        ..ApiServerConfig::default()
    };
    (config, dir)
}

const CONFIG: &str = r#"apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  enforce-version: latest
exemptions:
  usernames: [deployer]
  runtimeClasses: [kata]
  namespaces: [ops]
"#;

#[tokio::test]
async fn defaults_and_exemptions_come_from_the_configuration_file() {
    let (ts, _dir) = configured(CONFIG).await;

    // Namespaces without labels get the configured default.
    namespace(&ts, "plain", json!({})).await;
    let message = format!(
        "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": {PRIVILEGED_BASELINE}"
    );
    forbidden_with(
        &ts,
        "/api/v1/namespaces/plain/pods",
        privileged_pod("p"),
        &message,
    )
    .await;

    // An exempt namespace is told its labels will be ignored, and admits
    // anything.
    let ops = namespace(&ts, "ops", psa(&[("enforce", "restricted")])).await;
    assert_eq!(ops.code, StatusCode::CREATED, "{}", ops.body);
    assert_eq!(
        ops.warnings,
        [
            "namespace \"ops\" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"
        ]
    );
    let admitted = created_answer(&ts, "/api/v1/namespaces/ops/pods", host_pod("x")).await;
    assert!(admitted.annotations.contains(&(
        "pod-security.kubernetes.io/exempt".into(),
        "namespace".into()
    )));

    // An exempt user may; someone else in the same groups may not.
    let masters = ["system:masters".to_string()];
    let deployer = UserInfo::new("deployer", masters.clone());
    let intruder = UserInfo::new("deployer2", masters);
    let by_deployer = post_as(
        &ts,
        &deployer,
        "/api/v1/namespaces/plain/pods",
        host_pod("by-deployer"),
    )
    .await;
    assert_eq!(
        by_deployer.code,
        StatusCode::CREATED,
        "{}",
        by_deployer.body
    );
    let by_intruder = post_as(
        &ts,
        &intruder,
        "/api/v1/namespaces/plain/pods",
        host_pod("by-intruder"),
    )
    .await;
    by_intruder.assert_status(403, "Forbidden");
    // Impersonating the exempt user takes its exemption only when the
    // impersonation is allowed (here: the admin may). The impersonated
    // user keeps its group, as RBAC then judges the user it became.
    let impersonated = ts
        .call_with_headers(
            &UserInfo::new("admin", ["system:masters".to_string()]),
            Method::POST,
            "/api/v1/namespaces/plain/pods",
            Some(host_pod("as-deployer")),
            &[
                ("Impersonate-User", "deployer"),
                ("Impersonate-Group", "system:masters"),
            ],
        )
        .await;
    assert_eq!(impersonated.0, StatusCode::CREATED, "{}", impersonated.1);

    // An exempt runtime class is not checked; any other is. (A pod may
    // only name a class that exists.)
    for (class, handler) in [("kata", "kata-qemu"), ("runc", "runc")] {
        let _class = created_answer(
            &ts,
            "/apis/node.k8s.io/v1/runtimeclasses",
            json!({"metadata": {"name": class}, "handler": handler}),
        )
        .await;
    }
    let mut kata = host_pod("kata");
    kata["spec"]["runtimeClassName"] = json!("kata");
    let _admitted = created_answer(&ts, "/api/v1/namespaces/plain/pods", kata).await;
    let mut runc = host_pod("runc");
    runc["spec"]["runtimeClassName"] = json!("runc");
    let refused = forbidden(&ts, "/api/v1/namespaces/plain/pods", runc).await;
    assert_mentions(&refused.body, &["violates PodSecurity"]);
}

#[tokio::test]
async fn a_configuration_the_plugin_cannot_read_stops_the_server() {
    let (config, _dir) = admission_config(
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: strict\n",
    );
    let err = start_error(config).await;
    assert!(matches!(err, ApiServerError::Admission(_)), "{err}");
    assert!(
        err.to_string().contains(
            "plugin PodSecurity: defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
        ),
        "{err}"
    );
}

/// Labels written before Pod Security checked them (straight into the
/// store here) still govern: an unreadable enforce level enforces
/// restricted, and the namespace can still be edited otherwise.
#[tokio::test]
async fn unreadable_labels_already_stored_fail_closed() {
    use skiff_store::Store;

    let ts = TestServer::new().await;
    namespace(&ts, "old", json!({})).await;
    let (_, mut stored) = ts.get("/api/v1/namespaces/old").await;
    stored["metadata"]["labels"] = psa(&[("enforce", "bogus"), ("audit", "bogus")]);
    stored["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    ts.store
        .update(
            "/registry/core/namespaces/old",
            serde_json::to_vec(&stored).unwrap().into(),
            None,
        )
        .await
        .unwrap();
    // Lists are served from the watch cache, which admission reads too.
    let (five_seconds, every) = (Duration::from_secs(5), Duration::from_millis(20));
    eventually(five_seconds, every, || async {
        let (_, list) = ts
            .get("/api/v1/namespaces?fieldSelector=metadata.name%3Dold")
            .await;
        if list["items"][0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "bogus" {
            Ok(())
        } else {
            Err(format!("the cache never saw {list}"))
        }
    })
    .await;

    let refused = forbidden(&ts, "/api/v1/namespaces/old/pods", privileged_pod("p")).await;
    assert!(
        refused.body["message"].as_str().unwrap().starts_with(
            r#"pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged"#
        ),
        "{}",
        refused.body
    );
    let error = refused
        .annotations
        .iter()
        .find(|(k, _)| k == "pod-security.kubernetes.io/error")
        .map(|(_, v)| v.as_str());
    assert_eq!(
        error,
        Some(concat!(
            "Failed to parse policy: [",
            r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "bogus": must be one of privileged, baseline, restricted, "#,
            r#"metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "bogus": must be one of privileged, baseline, restricted]"#
        ))
    );
    // Audit fails open: nothing is recorded as an audit violation.
    assert!(
        !refused
            .annotations
            .iter()
            .any(|(k, _)| k == "pod-security.kubernetes.io/audit-violations")
    );

    // The same unreadable labels do not block other edits of the namespace.
    let edited = label(&ts, "old", json!({"team": "a"}), "").await;
    assert_eq!(edited.code, StatusCode::OK, "{}", edited.body);
}
