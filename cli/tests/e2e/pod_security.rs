//! Pod Security admission with real kubectl, as an administrator tries it:
//! `kubectl label ns ... pod-security.kubernetes.io/enforce=restricted`
//! keeps a privileged host pod out with upstream's message; a warn label
//! prints kubectl's `Warning:` lines and lets the pod in; a stricter
//! enforce label names the pods already there; and
//! `--admission-control-config-file` sets defaults and exemptions.

use std::process::Output;

use skiff_testkit::pod_security::{HOST_POD_BASELINE, HOST_POD_RESTRICTED, host_pod};

use super::support::{Server, assert_contains, stderr, stdout};

/// `kubectl label namespace NAMESPACE --overwrite
/// pod-security.kubernetes.io/SETTING` (`enforce=restricted`, say): how an
/// administrator sets a namespace's level, whether it had one or not.
fn label_pod_security(server: &Server, namespace: &str, setting: &str) -> Output {
    let label = format!("pod-security.kubernetes.io/{setting}");
    server.kubectl(&["label", "namespace", namespace, "--overwrite", &label])
}

/// A server with namespace `namespace` at pod security `setting`, as
/// [`label_pod_security`] sets it; kubectl's output of the labelling, which
/// must have succeeded.
fn server_with_namespace(namespace: &str, setting: &str) -> (Server, String) {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", namespace]);
    let labeled = label_pod_security(&server, namespace, setting);
    assert!(labeled.status.success(), "{}", stderr(&labeled));
    (server, stdout(&labeled))
}

#[test]
fn kubectl_enforce_restricted_keeps_a_privileged_host_pod_out() {
    let (server, labeled) = server_with_namespace("secure", "enforce=restricted");
    assert_contains(&labeled, "namespace/secure labeled");

    let pod = host_pod("x").to_string();
    let out = server.kubectl_stdin(&["create", "-n", "secure", "-f", "-"], &pod);
    assert!(!out.status.success(), "created: {}", stdout(&out));
    let err = stderr(&out);
    let want = format!(
        r#"Error from server (Forbidden): error when creating "STDIN": pods "x" is forbidden: violates PodSecurity "restricted:latest": {HOST_POD_RESTRICTED}"#
    );
    assert_eq!(err.trim(), want);
    let missing = server.kubectl_err(&["get", "pod", "x", "-n", "secure"]);
    assert_contains(&missing, "NotFound");

    // Nor does `kubectl run --privileged` get around it.
    let err = server.kubectl_err(&[
        "run",
        "sneaky",
        "-n",
        "secure",
        "--image=busybox",
        "--privileged",
    ]);
    assert_contains(
        &err,
        r#"pods "sneaky" is forbidden: violates PodSecurity "restricted:latest": privileged (container "sneaky" must not set securityContext.privileged=true)"#,
    );

    // Switching enforcement off with a value it cannot read is refused.
    let out = label_pod_security(&server, "secure", "enforce=off");
    assert!(!out.status.success(), "labeled: {}", stdout(&out));
    assert_contains(
        &stderr(&out),
        r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "off": must be one of privileged, baseline, restricted"#,
    );
}

#[test]
fn kubectl_prints_warn_level_warnings_and_names_existing_pods_on_a_new_enforce_level() {
    let (server, _) = server_with_namespace("loose", "warn=baseline");
    let pod = host_pod("x").to_string();
    let out = server.kubectl_stdin(&["create", "-n", "loose", "-f", "-"], &pod);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("pod/x created"), "{}", stdout(&out));
    assert_eq!(
        stderr(&out).trim(),
        format!(r#"Warning: would violate PodSecurity "baseline:latest": {HOST_POD_BASELINE}"#)
    );
    server.kubectl_ok(&["get", "pod", "x", "-n", "loose"]);

    // Enforcing baseline now: the label goes on, and kubectl prints which
    // pods already there would be refused.
    let out = label_pod_security(&server, "loose", "enforce=baseline");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("namespace/loose labeled"));
    let err = stderr(&out);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            r#"Warning: existing pods in namespace "loose" violate the new PodSecurity enforce level "baseline:latest""#,
            "Warning: x: host namespaces, hostPath volumes, privileged",
        ],
    );
}

#[test]
fn the_admission_configuration_file_sets_defaults_and_exemptions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("admission.yaml");
    std::fs::write(
        &config,
        r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
    exemptions:
      namespaces: [ops]
"#,
    )
    .expect("write the admission configuration");
    let config = config.to_string_lossy().into_owned();
    let server = Server::start_with(&[
        "--disable-agent",
        "--admission-control-config-file",
        &config,
    ]);

    // Unlabelled namespaces enforce the default...
    let err = server.kubectl_err(&["run", "p", "--image=busybox", "--privileged"]);
    assert_contains(
        &err,
        r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "p" must not set securityContext.privileged=true)"#,
    );
    // ...except the exempt one.
    server.kubectl_ok(&["create", "namespace", "ops"]);
    let out = server.kubectl(&["run", "p", "-n", "ops", "--image=busybox", "--privileged"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("pod/p created"), "{}", stdout(&out));
}
