use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

use super::*;

fn ingress(name: &str, created: &str, spec: Value) -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
        "spec": spec,
    }))
    .expect("an Ingress")
}

fn path(path: &str, kind: &str, service: &str) -> Value {
    json!({"path": path, "pathType": kind,
           "backend": {"service": {"name": service, "port": {"number": 80}}}})
}

fn rule(host: Option<&str>, paths: Vec<Value>) -> Value {
    let mut rule = json!({"http": {"paths": paths}});
    if let Some(host) = host {
        rule["host"] = json!(host);
    }
    rule
}

/// The Service a request goes to, or None for a 404.
fn service<'a>(table: &'a RouteTable, host: &str, path: &str) -> Option<&'a str> {
    table.route(host, path).map(|b| b.service.as_str())
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

/// The table of one Ingress `a`, created at T0, with `spec`: what most
/// cases route over.
fn one_ingress(spec: Value) -> RouteTable {
    RouteTable::build(&[ingress("a", T0, spec)])
}

#[test]
fn prefix_matches_whole_path_elements_and_ignores_a_trailing_slash() {
    let table = one_ingress(json!({"rules": [rule(Some("web.example"), vec![
        path("/foo", "Prefix", "foo"),
        path("/bar/", "Prefix", "bar"),
    ])]}));
    assert_eq!(service(&table, "web.example", "/foo"), Some("foo"));
    assert_eq!(service(&table, "web.example", "/foo/"), Some("foo"));
    assert_eq!(service(&table, "web.example", "/foo/x/y"), Some("foo"));
    assert_eq!(service(&table, "web.example", "/foobar"), None);
    assert_eq!(service(&table, "web.example", "/bar"), Some("bar"));
    assert_eq!(service(&table, "web.example", "/bar/baz"), Some("bar"));
    assert_eq!(service(&table, "web.example", "/"), None);
}

#[test]
fn exact_matches_only_the_same_path() {
    let table = one_ingress(
        json!({"rules": [rule(Some("web.example"), vec![path("/foo", "Exact", "foo")])]}),
    );
    assert_eq!(service(&table, "web.example", "/foo"), Some("foo"));
    assert_eq!(service(&table, "web.example", "/foo/"), None);
    assert_eq!(service(&table, "web.example", "/foo/bar"), None);
}

#[test]
fn longest_path_wins_and_exact_beats_prefix_at_equal_length() {
    let table = one_ingress(json!({"rules": [rule(Some("web.example"), vec![
        path("/", "Prefix", "root"),
        path("/api", "Prefix", "api"),
        path("/api/v1", "ImplementationSpecific", "v1"),
        path("/api", "Exact", "api-exact"),
    ])]}));
    assert_eq!(service(&table, "web.example", "/"), Some("root"));
    assert_eq!(service(&table, "web.example", "/other"), Some("root"));
    assert_eq!(service(&table, "web.example", "/api"), Some("api-exact"));
    assert_eq!(service(&table, "web.example", "/api/"), Some("api"));
    assert_eq!(service(&table, "web.example", "/api/v1/pods"), Some("v1"));
    assert_eq!(service(&table, "web.example", "/api/v2"), Some("api"));
}

#[test]
fn exact_host_beats_wildcard_which_beats_no_host() {
    let table = one_ingress(json!({"rules": [
        rule(None, vec![path("/", "Prefix", "any")]),
        rule(Some("*.example"), vec![path("/", "Prefix", "wild")]),
        rule(Some("web.example"), vec![path("/", "Prefix", "web")]),
    ]}));
    assert_eq!(service(&table, "web.example", "/"), Some("web"));
    assert_eq!(service(&table, "WEB.Example", "/"), Some("web"));
    assert_eq!(service(&table, "foo.example", "/"), Some("wild"));
    // A wildcard covers exactly one label.
    assert_eq!(service(&table, "a.b.example", "/"), Some("any"));
    assert_eq!(service(&table, "example", "/"), Some("any"));
    assert_eq!(service(&table, "other.test", "/"), Some("any"));
}

#[test]
fn a_host_without_a_matching_path_falls_back_to_hostless_rules_then_default_backend() {
    let table = one_ingress(json!({
    "defaultBackend": {"service": {"name": "fallback", "port": {"name": "http"}}},
    "rules": [
        rule(Some("web.example"), vec![path("/app", "Prefix", "app")]),
        rule(None, vec![path("/static", "Prefix", "static")]),
    ]}));
    assert_eq!(service(&table, "web.example", "/app"), Some("app"));
    assert_eq!(service(&table, "web.example", "/static/x"), Some("static"));
    assert_eq!(service(&table, "web.example", "/nothing"), Some("fallback"));
    let fallback = table.route("x.test", "/").expect("default backend");
    assert_eq!(fallback.port, PortRef::Name("http".into()));
    assert_eq!(fallback.namespace, "ns");
}

#[test]
fn nothing_matches_without_a_default_backend() {
    let table = one_ingress(
        json!({"rules": [rule(Some("web.example"), vec![path("/", "Prefix", "web")])]}),
    );
    assert_eq!(service(&table, "other.example", "/"), None);
    assert_eq!(service(&RouteTable::default(), "web.example", "/"), None);
}

#[test]
fn the_oldest_ingress_keeps_a_contested_path_and_default_backend() {
    let newer = ingress(
        "newer",
        T1,
        json!({"defaultBackend": {"service": {"name": "new-default", "port": {"number": 80}}},
               "rules": [rule(Some("web.example"), vec![
                   path("/", "Prefix", "new"), path("/only-new", "Prefix", "only-new")])]}),
    );
    let older = ingress(
        "older",
        T0,
        json!({"defaultBackend": {"service": {"name": "old-default", "port": {"number": 80}}},
               "rules": [rule(Some("web.example"), vec![path("/", "Prefix", "old")])]}),
    );
    // The order of the list does not matter, only the age.
    let table = RouteTable::build(&[newer, older]);
    assert_eq!(service(&table, "web.example", "/"), Some("old"));
    assert_eq!(
        service(&table, "web.example", "/only-new"),
        Some("only-new")
    );
    assert_eq!(service(&table, "x.example", "/"), Some("old-default"));
}

#[test]
fn backends_without_a_service_port_are_skipped() {
    let table = one_ingress(json!({"rules": [rule(Some("web.example"), vec![
        json!({"path": "/r", "pathType": "Prefix",
               "backend": {"resource": {"kind": "Bucket", "name": "b"}}}),
        path("/", "Prefix", "web"),
    ])]}));
    assert_eq!(service(&table, "web.example", "/r"), Some("web"));
    assert_eq!(table.backends().count(), 1);
}
