//! CustomResourceDefinitions with real clients: kubectl (apply, wait for
//! Established, tables with printer columns, short names, scale, a 422 for
//! an invalid object, deletion) and the Python dynamic client.

use super::support::{Server, assert_contains, python_ok, rows};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
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
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              replicas: {type: integer, default: 1}
          status:
            type: object
            properties:
              ready: {type: integer}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.ready
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
"#;

#[test]
fn kubectl_drives_a_custom_resource_through_its_life() {
    let server = Server::start_with(&["--disable-agent"]);
    server.apply_crd(CRD, "widgets.example.com");

    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n",
    );
    let table = rows(&server.kubectl_ok(&["get", "widgets"]));
    assert_eq!(table[0], ["NAME", "SIZE", "REPLICAS", "AGE"]);
    assert_eq!(&table[1][..3], ["w1", "3", "1"]);
    let short = rows(&server.kubectl_ok(&["get", "wd", "w1"]));
    assert_eq!(short[1][0], "w1");

    server.kubectl_ok(&["scale", "widget/w1", "--replicas=4"]);
    assert_eq!(
        server.kubectl_ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]),
        "4"
    );

    let err = server.kubectl_stdin_err(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: big}\n",
    );
    assert_contains(
        &err,
        r#"The Widget "bad" is invalid: spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#,
    );
    let missing = server.kubectl_err(&["get", "widget", "bad"]);
    assert_contains(&missing, "not found");

    server.kubectl_ok(&["delete", "widget", "w1"]);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 1}\n",
    );
    server.kubectl_ok(&["delete", "crd", "widgets.example.com", "--timeout=30s"]);
    // kubectl may still hold the group in its discovery cache; either way
    // the resource is no longer served.
    let gone = server.kubectl_err(&["get", "widgets"]);
    assert!(
        gone.contains("the server doesn't have a resource type \"widgets\"")
            || gone.contains("the server could not find the requested resource"),
        "{gone}"
    );
    let raw = server.kubectl_err(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets",
    ]);
    assert!(
        raw.contains("NotFound") || raw.contains("not found"),
        "{raw}"
    );
}

#[test]
fn python_dynamic_client_manages_crds_and_custom_objects() {
    let server = Server::start_with(&["--disable-agent"]);
    python_ok(&server.kubeconfig(), "crd.py", &[]);
}
