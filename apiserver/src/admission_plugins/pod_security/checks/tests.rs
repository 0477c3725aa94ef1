//! Every check at baseline and restricted, with upstream's exact words:
//! each case changes one thing on a pod that passes restricted and says
//! what baseline and restricted answer.

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use skiff_testkit::pod_security::{HOST_POD_BASELINE, HOST_POD_RESTRICTED, host_pod};

use super::super::messages::detail;
use super::super::policy::{Level, LevelVersion, Version};
use super::{CHECKS, evaluate};

/// A pod that passes restricted: one container `c` with everything set.
fn compliant() -> Value {
    json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}
        }}]}
    })
}

/// JSON merge patch (objects merge, `null` removes, anything else replaces).
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn at(level: Level, version: Version, pod: &Value) -> String {
    let meta: ObjectMeta = serde_json::from_value(pod["metadata"].clone()).unwrap();
    let spec: PodSpec = serde_json::from_value(pod["spec"].clone()).unwrap();
    detail(&evaluate(LevelVersion { level, version }, &meta, &spec))
}

fn latest(level: Level, pod: &Value) -> String {
    at(level, Version::Latest, pod)
}

/// `patch` over the compliant pod; `(baseline, restricted)` at latest.
#[track_caller]
fn case(patch: Value, baseline: &str, restricted: &str) {
    let mut pod = compliant();
    merge(&mut pod, &patch);
    assert_eq!(latest(Level::Baseline, &pod), baseline, "baseline: {patch}");
    assert_eq!(
        latest(Level::Restricted, &pod),
        restricted,
        "restricted: {patch}"
    );
    assert_eq!(latest(Level::Privileged, &pod), "", "privileged allows all");
}

/// The container `c` with `security` merged into its security context.
fn container(security: Value) -> Value {
    let mut c = compliant()["spec"]["containers"][0].clone();
    merge(&mut c["securityContext"], &security);
    c
}

#[test]
fn the_compliant_pod_passes_every_level() {
    case(json!({}), "", "");
}

#[test]
fn host_namespaces() {
    case(
        json!({"spec": {"hostNetwork": true, "hostPID": true, "hostIPC": true}}),
        "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)",
        "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)",
    );
    case(json!({"spec": {"hostNetwork": false}}), "", "");
}

#[test]
fn privileged() {
    let both = r#"privileged (container "c" must not set securityContext.privileged=true)"#;
    case(
        json!({"spec": {"containers": [container(json!({"privileged": true}))]}}),
        both,
        both,
    );
    let init = json!({"name": "i", "image": "x", "securityContext": {"privileged": true}});
    let mut pod = compliant();
    pod["spec"]["initContainers"] = json!([init]);
    assert_eq!(
        latest(Level::Baseline, &pod),
        r#"privileged (container "i" must not set securityContext.privileged=true)"#
    );
}

#[test]
fn capabilities_beyond_the_default_set() {
    let spec = |add: Value| json!({"spec": {"containers": [container(json!({"capabilities": {"add": add}}))]}});
    case(
        spec(json!(["SYS_ADMIN", "NET_RAW", "CHOWN"])),
        r#"non-default capabilities (container "c" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#,
        r#"unrestricted capabilities (container "c" must not include "CHOWN", "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#,
    );
    // Default capabilities pass baseline; restricted allows only
    // NET_BIND_SERVICE back.
    case(
        spec(json!(["CHOWN"])),
        "",
        r#"unrestricted capabilities (container "c" must not include "CHOWN" in securityContext.capabilities.add)"#,
    );
    case(spec(json!(["NET_BIND_SERVICE"])), "", "");
    case(
        json!({"spec": {"containers": [container(json!({"capabilities": {"drop": ["NET_RAW"]}}))]}}),
        "",
        r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])"#,
    );
    let mut two = compliant();
    two["spec"]["containers"] = json!([
        {"name": "a", "image": "x", "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"add": ["SYS_TIME"]}}},
        {"name": "b", "image": "x", "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}}}
    ]);
    assert_eq!(
        latest(Level::Restricted, &two),
        r#"unrestricted capabilities (containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; container "a" must not include "SYS_TIME" in securityContext.capabilities.add)"#
    );
}

#[test]
fn host_path_and_restricted_volume_types() {
    case(
        json!({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}),
        r#"hostPath volumes (volume "root")"#,
        r#"restricted volume types (volume "root" uses restricted volume type "hostPath")"#,
    );
    case(
        json!({"spec": {"volumes": [
            {"name": "n", "nfs": {"server": "s", "path": "/"}},
            {"name": "g", "gitRepo": {"repository": "r"}},
            {"name": "h", "hostPath": {"path": "/a"}}
        ]}}),
        r#"hostPath volumes (volume "h")"#,
        r#"restricted volume types (volumes "n", "g", "h" use restricted volume types "gitRepo", "hostPath", "nfs")"#,
    );
    case(
        json!({"spec": {"volumes": [
            {"name": "a", "configMap": {"name": "x"}},
            {"name": "b", "secret": {"secretName": "x"}},
            {"name": "c", "emptyDir": {}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "x"}},
            {"name": "e", "projected": {"sources": []}},
            {"name": "f", "downwardAPI": {"items": []}},
            {"name": "g", "csi": {"driver": "x"}},
            {"name": "h", "ephemeral": {}},
            {"name": "i", "image": {"reference": "x"}}
        ]}}),
        "",
        "",
    );
}

#[test]
fn host_ports() {
    let with_port = |name: &str, port: i32| {
        let mut c = container(json!({}));
        c["name"] = json!(name);
        c["ports"] = json!([{"containerPort": 80, "hostPort": port}]);
        c
    };
    let both = r#"hostPort (containers "c", "d" use hostPorts 443, 8080)"#;
    case(
        json!({"spec": {"containers": [with_port("c", 8080), with_port("d", 443)]}}),
        both,
        both,
    );
    let one = r#"hostPort (container "c" uses hostPort 8080)"#;
    case(
        json!({"spec": {"containers": [with_port("c", 8080)]}}),
        one,
        one,
    );
    case(json!({"spec": {"containers": [with_port("c", 0)]}}), "", "");
}

#[test]
fn proc_mount() {
    let both = r#"procMount (container "c" must not set securityContext.procMount to "Unmasked")"#;
    case(
        json!({"spec": {"containers": [container(json!({"procMount": "Unmasked"}))]}}),
        both,
        both,
    );
    case(
        json!({"spec": {"containers": [container(json!({"procMount": "Default"}))]}}),
        "",
        "",
    );
}

#[test]
fn se_linux_options() {
    let both = r#"seLinuxOptions (pod and container "c" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set)"#;
    case(
        json!({"spec": {
            "securityContext": {"seLinuxOptions": {"user": "u", "role": "r"}},
            "containers": [container(json!({"seLinuxOptions": {"type": "spc_t"}}))]
        }}),
        both,
        both,
    );
    // container_engine_t is allowed from policy v1.31 on.
    let mut pod = compliant();
    merge(
        &mut pod,
        &json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "container_engine_t", "level": "s0"}}}}),
    );
    assert_eq!(latest(Level::Baseline, &pod), "");
    assert_eq!(
        at(Level::Baseline, Version::Minor(30), &pod),
        r#"seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "container_engine_t")"#
    );
}

#[test]
fn seccomp_profiles() {
    let both =
        r#"seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")"#;
    case(
        json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}),
        both,
        both,
    );
    // Unset passes baseline; restricted wants it on the pod or every
    // container.
    case(
        json!({"spec": {"containers": [container(json!({"seccompProfile": null}))]}}),
        "",
        r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
    );
    case(
        json!({"spec": {
            "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
            "containers": [container(json!({"seccompProfile": null}))]
        }}),
        "",
        "",
    );
    // Before v1.19 the alpha annotations were the field.
    let mut annotated = compliant();
    annotated["metadata"]["annotations"] = json!({
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
        "container.seccomp.security.alpha.kubernetes.io/c": "localhost/profile.json"
    });
    assert_eq!(
        at(Level::Baseline, Version::Minor(18), &annotated),
        r#"seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")"#
    );
    assert_eq!(latest(Level::Baseline, &annotated), "");
}

#[test]
fn sysctls_follow_the_policy_version() {
    let mut pod = compliant();
    merge(
        &mut pod,
        &json!({"spec": {"securityContext": {"sysctls": [
            {"name": "kernel.msgmax", "value": "1"},
            {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"},
            {"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}
        ]}}}),
    );
    assert_eq!(
        latest(Level::Baseline, &pod),
        "forbidden sysctls (kernel.msgmax)"
    );
    assert_eq!(
        latest(Level::Restricted, &pod),
        "forbidden sysctls (kernel.msgmax)"
    );
    assert_eq!(
        at(Level::Baseline, Version::Minor(31), &pod),
        "forbidden sysctls (kernel.msgmax, net.ipv4.tcp_rmem)"
    );
}

#[test]
fn windows_host_process() {
    let both = r#"hostProcess (pod and container "c" must not set securityContext.windowsOptions.hostProcess=true)"#;
    case(
        json!({"spec": {
            "securityContext": {"windowsOptions": {"hostProcess": true}},
            "containers": [container(json!({"windowsOptions": {"hostProcess": true}}))]
        }}),
        both,
        both,
    );
}

#[test]
fn app_armor_fields_and_annotations() {
    let both = r#"forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/c="unconfined"")"#;
    case(
        json!({
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
            "spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}
        }),
        both,
        both,
    );
    let one = r#"forbidden AppArmor profile (container "c" must not set AppArmor profile type to "Unconfined")"#;
    case(
        json!({"spec": {"containers": [container(json!({"appArmorProfile": {"type": "Unconfined"}}))]}}),
        one,
        one,
    );
    case(
        json!({
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "localhost/mine"}},
            "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}
        }),
        "",
        "",
    );
}

#[test]
fn privilege_escalation_and_users_are_restricted_only() {
    case(
        json!({"spec": {"containers": [container(json!({"allowPrivilegeEscalation": null}))]}}),
        "",
        r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)"#,
    );
    case(
        json!({"spec": {"containers": [container(json!({"runAsNonRoot": false}))]}}),
        "",
        r#"runAsNonRoot != true (container "c" must not set securityContext.runAsNonRoot=false)"#,
    );
    case(
        json!({"spec": {"containers": [container(json!({"runAsNonRoot": null}))]}}),
        "",
        r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#,
    );
    case(
        json!({"spec": {
            "securityContext": {"runAsNonRoot": true},
            "containers": [container(json!({"runAsNonRoot": null}))]
        }}),
        "",
        "",
    );
    case(
        json!({"spec": {
            "securityContext": {"runAsUser": 0},
            "containers": [container(json!({"runAsUser": 0}))]
        }}),
        "",
        r#"runAsUser=0 (pod and container "c" must not set runAsUser=0)"#,
    );
    case(
        json!({"spec": {"containers": [container(json!({"runAsUser": 1000}))]}}),
        "",
        "",
    );
}

/// The administrator's pod from the issue: privileged, hostPID and the
/// host's root mounted, every failure listed in upstream's order.
#[test]
fn a_privileged_host_pod_fails_with_every_reason_in_order() {
    let pod = host_pod("x");
    assert_eq!(latest(Level::Baseline, &pod), HOST_POD_BASELINE);
    assert_eq!(latest(Level::Restricted, &pod), HOST_POD_RESTRICTED);
}

#[test]
fn pinned_versions_apply_only_the_checks_that_existed() {
    let mut pod = compliant();
    merge(
        &mut pod,
        &json!({"spec": {
            "securityContext": {"runAsUser": 0},
            "containers": [container(json!({"capabilities": {"drop": null, "add": ["NET_RAW"]}, "allowPrivilegeEscalation": null}))]
        }}),
    );
    assert_eq!(
        latest(Level::Restricted, &pod),
        concat!(
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]; container "c" must not include "NET_RAW" in securityContext.capabilities.add), "#,
            r#"runAsUser=0 (pod must not set runAsUser=0)"#
        )
    );
    // v1.21: no capabilities_restricted yet (so baseline's capability
    // check still runs) and no runAsUser check.
    assert_eq!(
        at(Level::Restricted, Version::Minor(21), &pod),
        concat!(
            r#"non-default capabilities (container "c" must not include "NET_RAW" in securityContext.capabilities.add), "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)"#
        )
    );
    // v1.7: allowPrivilegeEscalation did not exist either.
    assert_eq!(
        at(Level::Restricted, Version::Minor(7), &pod),
        r#"non-default capabilities (container "c" must not include "NET_RAW" in securityContext.capabilities.add)"#
    );
    // The current minor is the newest revision, as latest.
    assert_eq!(
        at(Level::Restricted, Version::Minor(33), &pod),
        latest(Level::Restricted, &pod)
    );
}

#[test]
fn windows_pods_skip_the_linux_only_checks_from_v1_25() {
    let pod = json!({
        "metadata": {"name": "w"},
        "spec": {"os": {"name": "windows"}, "containers": [{"name": "c", "image": "x"}]}
    });
    assert_eq!(
        latest(Level::Restricted, &pod),
        r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#
    );
    assert_eq!(
        at(Level::Restricted, Version::Minor(24), &pod),
        concat!(
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )
    );
}

#[test]
fn ephemeral_containers_are_checked_too() {
    let mut pod = compliant();
    pod["spec"]["ephemeralContainers"] =
        json!([{"name": "debug", "image": "busybox", "securityContext": {"privileged": true}}]);
    assert_eq!(
        latest(Level::Baseline, &pod),
        r#"privileged (container "debug" must not set securityContext.privileged=true)"#
    );
}

#[test]
fn checks_are_listed_baseline_first_each_level_sorted_by_id() {
    let levels: Vec<Level> = CHECKS.iter().map(|c| c.level).collect();
    let mut sorted_levels = levels.clone();
    sorted_levels.sort();
    assert_eq!(levels, sorted_levels);
    for level in [Level::Baseline, Level::Restricted] {
        let ids: Vec<&str> = CHECKS
            .iter()
            .filter(|c| c.level == level)
            .map(|c| c.id)
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted, "{level:?}");
    }
    for check in CHECKS {
        let since: Vec<u32> = check.revisions.iter().map(|r| r.since).collect();
        assert!(since.windows(2).all(|w| w[0] < w[1]), "{}", check.id);
        for revision in check.revisions {
            for overridden in revision.overrides {
                assert!(
                    CHECKS
                        .iter()
                        .any(|c| c.id == *overridden && c.level == Level::Baseline),
                    "{} overrides unknown {overridden}",
                    check.id
                );
            }
        }
    }
}
