use serde_json::json;

use super::*;

fn run(
    source: &str,
    roots: &[&'static str],
    vars: &[(&str, serde_json::Value)],
) -> Result<Value, EvalError> {
    let program = compile(source, &Declarations::roots(roots)).unwrap();
    let bound: Vec<(&str, Value)> = vars.iter().map(|(n, v)| (*n, from_json(v))).collect();
    evaluate(&program, &bound, &Budget::standard())
}

#[test]
fn variables_are_json_objects_with_ints_and_doubles() {
    let object = json!({"spec": {"replicas": 3, "ratio": 0.5, "name": "web", "tags": ["a", "b"]}});
    let vars = [("object", object)];
    let yes = |s: &str| as_bool(&run(s, &["object"], &vars).unwrap()).unwrap();
    assert!(yes("object.spec.replicas == 3 && object.spec.replicas < 5"));
    assert!(yes("object.spec.ratio > 0.25"));
    assert!(yes("has(object.spec.name) && !has(object.spec.missing)"));
    assert!(yes(
        "object.spec.tags.all(t, t.size() == 1) && 'b' in object.spec.tags"
    ));
    assert!(yes("object.spec.tags.map(t, t + '!') == ['a!', 'b!']"));
    assert!(yes("object.spec.tags.filter(t, t != 'a').size() == 1"));
    assert!(yes("object.spec.name.matches('^w[a-z]+$')"));
}

#[test]
fn extension_functions_are_there() {
    let vars = [("object", json!({"name": "Web-Frontend"}))];
    let value = run("object.name.lowerAscii().split('-')", &["object"], &vars).unwrap();
    assert_eq!(to_json(&value), Some(json!(["web", "frontend"])));
    let value = run("math.greatest(1, 7, 3)", &[], &[]).unwrap();
    assert_eq!(to_json(&value), Some(json!(7)));
}

#[test]
fn syntax_errors_and_undeclared_names_do_not_compile() {
    let roots = Declarations::roots(&["object"]);
    assert!(matches!(
        compile("object.spec.replicas <", &roots),
        Err(CompileError::Syntax(_))
    ));
    assert_eq!(
        compile("objekt.spec == 1", &roots).unwrap_err(),
        CompileError::Undeclared("objekt".into())
    );
    // Comprehension variables are declared inside their loop only.
    assert!(compile("object.items.all(x, x > 0)", &roots).is_ok());
    assert_eq!(
        compile("object.items.all(x, x > 0) && x == 1", &roots).unwrap_err(),
        CompileError::Undeclared("x".into())
    );
    let with_fields = Declarations {
        roots: vec!["variables"],
        fields: Some(("variables", vec!["small".into()])),
    };
    assert!(compile("variables.small", &with_fields).is_ok());
    assert_eq!(
        compile("variables.big", &with_fields).unwrap_err(),
        CompileError::UndefinedVariable("big".into())
    );
}

#[test]
fn runtime_errors_are_reported() {
    let vars = [("object", json!({"spec": {}}))];
    let error = run("object.spec.replicas > 1", &["object"], &vars).unwrap_err();
    assert_eq!(error, EvalError::Runtime("no such key: replicas".into()));
    assert!(matches!(
        as_bool(&Value::Int(1)),
        Err(EvalError::WrongType { .. })
    ));
}

#[test]
fn a_hostile_expression_runs_out_of_budget() {
    let list: Vec<i64> = (0..2000).collect();
    let vars = [("object", json!({"l": list}))];
    // Four million iterations (and a quadratic list) against a budget of a million.
    let program = compile(
        "object.l.all(a, object.l.all(b, a + b >= 0))",
        &Declarations::roots(&["object"]),
    )
    .unwrap();
    let bound = [("object", from_json(&vars[0].1))];
    // Either limit may stop it first (a debug build is slow); both must.
    let error = evaluate(&program, &bound, &Budget::standard()).unwrap_err();
    assert!(
        matches!(error, EvalError::CostExceeded | EvalError::Timeout),
        "{error}"
    );
    let by_count = Budget::new(10_000, Duration::from_secs(60));
    assert_eq!(
        evaluate(&program, &bound, &by_count).unwrap_err(),
        EvalError::CostExceeded
    );
    let nested_map = compile(
        "object.l.map(a, object.l.map(b, b)).size() > 0",
        &Declarations::roots(&["object"]),
    )
    .unwrap();
    let by_count = Budget::new(10_000, Duration::from_secs(60));
    assert_eq!(
        evaluate(&nested_map, &bound, &by_count).unwrap_err(),
        EvalError::CostExceeded
    );
    // The same expression within budget succeeds.
    let small = [("object", from_json(&json!({"l": [1, 2, 3]})))];
    assert_eq!(
        evaluate(&program, &small, &Budget::standard()),
        Ok(Value::Bool(true))
    );
    // And a deadline in the past stops anything at its first iteration.
    let late = Budget::new(DEFAULT_ITERATIONS, Duration::ZERO);
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        evaluate(&program, &small, &late).unwrap_err(),
        EvalError::Timeout
    );
}

#[test]
fn compiled_programs_are_cached() {
    let roots = Declarations::roots(&["self"]);
    let a = compile("self.size() > 1", &roots).unwrap();
    let b = compile("self.size() > 1", &roots).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.source(), "self.size() > 1");
}
