//! The pod from Pod Security's issue — privileged, the host's PIDs, `/`
//! mounted — and what upstream's levels say of it: the case the checks'
//! unit tests, the API tests and the end-to-end suite each put to
//! admission, so all three hold it to the same words.

use serde_json::{Value, json};

/// The pod from the issue, named `name` (its container sleeps, so it
/// stays up where a node runs it).
pub fn host_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": name},
    "spec": {
        "hostPID": true,
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "securityContext": {"privileged": true},
            "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}]
    }})
}

/// What the `baseline` level says of [`host_pod`], in upstream's words
/// and order.
pub const HOST_POD_BASELINE: &str = concat!(
    r#"host namespaces (hostPID=true), hostPath volumes (volume "root"), "#,
    r#"privileged (container "c" must not set securityContext.privileged=true)"#
);

/// What the `restricted` level says of [`host_pod`], in upstream's words
/// and order.
pub const HOST_POD_RESTRICTED: &str = concat!(
    r#"host namespaces (hostPID=true), "#,
    r#"privileged (container "c" must not set securityContext.privileged=true), "#,
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"restricted volume types (volume "root" uses restricted volume type "hostPath"), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
);
