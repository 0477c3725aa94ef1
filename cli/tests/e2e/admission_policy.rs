//! CEL admission with a real server and kubectl: a ValidatingAdmissionPolicy
//! and binding refuse a Deployment with more than five replicas with
//! upstream's message; a Warn binding prints kubectl's warning and lets the
//! write through; a CRD's `x-kubernetes-validations` rule refuses a custom
//! object, and its transition rule refuses an update.

use std::time::Duration;

use super::support::{Server, apply, assert_contains, eventually};

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-replicas
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: max-replicas-binding
spec:
  policyName: max-replicas
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: team-label
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: deployments should carry a team label
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: team-label-binding
spec:
  policyName: team-label
  validationActions: [Warn]
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.replicas <= self.maxReplicas
              message: must be at most maxReplicas
              fieldPath: .replicas
            properties:
              replicas: {type: integer}
              maxReplicas: {type: integer}
              tier:
                type: string
                x-kubernetes-validations:
                - rule: self == oldSelf
                  message: tier is immutable
"#;

#[test]
fn a_policy_refuses_warns_and_crd_rules_refuse_through_kubectl() {
    let server = Server::start_with(&["--disable-agent"]);
    apply(&server, POLICY);
    let table = server.kubectl_ok(&["get", "validatingadmissionpolicies"]);
    assert!(
        table.contains("VALIDATIONS") && table.contains("max-replicas"),
        "{table}"
    );

    // The policies take effect once the server's caches have them.
    let refused = eventually(Duration::from_secs(10), "the policy to refuse", || {
        let out = server.kubectl(&[
            "create",
            "deployment",
            "big",
            "--image=busybox",
            "--replicas=6",
        ]);
        if out.status.success() {
            server.kubectl_ok(&["delete", "deployment", "big"]);
            return None;
        }
        Some(String::from_utf8_lossy(&out.stderr).into_owned())
    });
    assert_contains(
        &refused,
        "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5",
    );

    // Warn: the write goes through and kubectl prints the warning.
    let mut attempt = 0;
    let stderr = eventually(Duration::from_secs(10), "the Warn binding", || {
        attempt += 1;
        let name = format!("small-{attempt}");
        let out = server.kubectl(&[
            "create",
            "deployment",
            &name,
            "--image=busybox",
            "--replicas=2",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        stderr.contains("Warning:").then_some(stderr)
    });
    assert_contains(
        &stderr,
        "Warning: Validation failed for ValidatingAdmissionPolicy 'team-label' with binding 'team-label-binding': deployments should carry a team label",
    );

    // CRD validation rules.
    server.apply_crd(CRD, "gadgets.example.com");
    let stderr = server.kubectl_stdin_err(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {replicas: 7, maxReplicas: 5, tier: gold}\n",
    );
    assert_contains(
        &stderr,
        "spec.replicas: Invalid value: \"object\": must be at most maxReplicas",
    );
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {replicas: 2, maxReplicas: 5, tier: gold}\n",
    );
    let out = server.kubectl(&[
        "patch",
        "gadget",
        "g",
        "--type=merge",
        "-p",
        r#"{"spec":{"tier":"silver"}}"#,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains(
        &stderr,
        "spec.tier: Invalid value: \"string\": tier is immutable",
    );
    assert_eq!(
        server.kubectl_ok(&["get", "gadget", "g", "-o", "jsonpath={.spec.tier}"]),
        "gold"
    );
}
