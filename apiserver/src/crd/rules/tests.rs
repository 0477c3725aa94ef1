use serde_json::json;

use super::*;

fn schema(value: Value) -> Schema {
    Schema::parse(&value).unwrap()
}

fn run(schema: &Schema, object: Value, old: Option<Value>) -> Vec<String> {
    let mut errors = Vec::new();
    validate(schema, &object, old.as_ref(), &mut errors);
    errors.iter().map(FieldError::render).collect()
}

fn widget_schema() -> Schema {
    schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= self.maxReplicas", "message": "must be at most maxReplicas", "fieldPath": ".replicas"},
            {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not shrink"}],
        "properties": {
            "replicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer",
                    "x-kubernetes-validations": [{"rule": "self > 1024", "messageExpression": "'port ' + string(self) + ' is privileged'"},
                        {"rule": "self == oldSelf", "message": "port is immutable", "reason": "FieldValueForbidden"}]}}}},
            "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3"}]}},
            "limits": {"type": "object", "additionalProperties": {"type": "integer",
                "x-kubernetes-validations": [{"rule": "self >= 0", "message": "must not be negative"}]}}}}}}),
    )
}

#[test]
fn rules_at_nested_nodes_report_at_their_paths() {
    let s = widget_schema();
    let errors = run(
        &s,
        json!({"spec": {"replicas": 7, "maxReplicas": 5, "name": "a",
        "ports": [{"name": "http", "port": 80}], "tags": ["ok", "toolong"], "limits": {"cpu": -1, "mem": 2}}}),
        None,
    );
    assert_eq!(
        errors,
        [
            "spec.replicas: Invalid value: \"object\": must be at most maxReplicas",
            "spec.limits[cpu]: Invalid value: \"integer\": must not be negative",
            "spec.ports[0].port: Invalid value: \"integer\": port 80 is privileged",
            "spec.tags[1]: Invalid value: \"string\": failed rule: self.size() <= 3",
        ]
    );
    assert!(run(&s, json!({"spec": {"replicas": 1, "maxReplicas": 5}}), None).is_empty());
}

#[test]
fn transition_rules_see_the_old_value_only_on_update() {
    let s = widget_schema();
    let new = json!({"spec": {"replicas": 2, "maxReplicas": 5, "name": "b", "ports": [{"name": "http", "port": 8081}]}});
    // On create there is no oldSelf: the transition rules do not run.
    assert!(run(&s, new.clone(), None).is_empty());
    let old = json!({"spec": {"replicas": 3, "maxReplicas": 5, "name": "a", "ports": [{"name": "http", "port": 8080}]}});
    assert_eq!(
        run(&s, new.clone(), Some(old)),
        [
            "spec: Invalid value: \"object\": replicas may not shrink",
            "spec.name: Invalid value: \"string\": name is immutable",
            "spec.ports[0].port: Forbidden: port is immutable",
        ]
    );
    // An item of a map list is matched by key: a new item has no old self.
    let old = json!({"spec": {"replicas": 2, "maxReplicas": 5, "name": "b", "ports": [{"name": "admin", "port": 8080}]}});
    assert!(run(&s, new, Some(old)).is_empty());
}

#[test]
fn optional_old_self_runs_on_create_too() {
    let s = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "!oldSelf.hasValue() || self.mode == oldSelf.value().mode",
            "optionalOldSelf": true, "message": "mode is immutable"}, {"rule": "oldSelf.hasValue() || self.mode == 'a'", "optionalOldSelf": true, "message": "starts as a"}],
        "properties": {"mode": {"type": "string"}}}}}),
    );
    assert_eq!(
        run(&s, json!({"spec": {"mode": "b"}}), None),
        ["spec: Invalid value: \"object\": starts as a"]
    );
    assert!(run(&s, json!({"spec": {"mode": "a"}}), None).is_empty());
    assert_eq!(
        run(
            &s,
            json!({"spec": {"mode": "b"}}),
            Some(json!({"spec": {"mode": "a"}}))
        ),
        ["spec: Invalid value: \"object\": mode is immutable"]
    );
}

#[test]
fn runtime_errors_and_exhausted_budgets_are_field_errors() {
    let s = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.missing > 1"}],
        "properties": {"items": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, self.all(c, a + b + c >= 0)))"}]}}}}}),
    );
    let items: Vec<i64> = (0..200).collect();
    let errors = run(&s, json!({"spec": {"items": items}}), None);
    assert_eq!(
        errors[0],
        "spec: Invalid value: \"object\": rule evaluation error: no such key: missing"
    );
    assert_eq!(
        errors[1],
        "spec.items: Forbidden: validation failed due to running out of cost budget, no further validation rules will be run"
    );
}

#[test]
fn rules_that_do_not_compile_refuse_the_definition() {
    let written = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.replicas <"}, {"rule": "self.x == other"},
            {"rule": "self.x > 0", "messageExpression": "'a' +"}, {"rule": "self.x > 0", "reason": "Bogus"},
            {"rule": "self.x > 0", "optionalOldSelf": true}, {"rule": "self.x == oldSelf.x"}],
        "properties": {"x": {"type": "integer"}}}}});
    let mut errors = Vec::new();
    check_definition(
        &written,
        "spec.versions[0].schema.openAPIV3Schema",
        &mut errors,
    );
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(
        fields,
        [
            format!("{at}[0].rule"),
            format!("{at}[1].rule"),
            format!("{at}[2].messageExpression"),
            format!("{at}[3].reason"),
            format!("{at}[4].optionalOldSelf"),
        ]
    );
    assert!(
        errors[0].render().contains("compilation failed: "),
        "{}",
        errors[0].render()
    );
    assert!(
        errors[1]
            .render()
            .contains("undeclared reference to 'other'"),
        "{}",
        errors[1].render()
    );
}
