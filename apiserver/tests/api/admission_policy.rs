//! ValidatingAdmissionPolicy through the API: policies whose CEL does not
//! compile are refused at write time; a bound policy refuses, warns about
//! or audits writes as its binding says, with upstream's wording and the
//! validation's reason; parameters, match conditions, variables and
//! selectors decide what is checked; and from the attacker's side, an
//! expression that errors or runs away fails closed under
//! `failurePolicy: Fail` instead of letting the write through or hanging.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::{
    Answer, Client, TestServer, assert_mentions, created_answer, labelled_namespace, message_of,
    post_answer, put_answer, send_answer, strings,
};

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// The harness's deployment with `labels`, which the bindings' object
/// selectors read.
fn deployment(name: &str, replicas: i64, labels: Value) -> Value {
    let mut deployment = super::harness::deployment(name, replicas);
    deployment["metadata"]["labels"] = labels;
    deployment
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["apps"],
            "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]});
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["policyName"] = json!(policy);
    if spec.get("validationActions").is_none() {
        spec["validationActions"] = json!(["Deny"]);
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

async fn install(ts: &TestServer, policy: Value, binding: Value) {
    created_answer(ts, POLICIES, policy).await;
    created_answer(ts, BINDINGS, binding).await;
}

/// A server with the one policy `name` of `spec` and a binding
/// `<name>-binding` that denies what it fails: most tests' setup.
async fn server_denying(name: &str, spec: Value) -> TestServer {
    let ts = TestServer::new().await;
    let bound = binding(&format!("{name}-binding"), name, json!({}));
    install(&ts, policy(name, spec), bound).await;
    ts
}

/// Creates `object` in `collection` until `settled` accepts the answer, or
/// a second passes (the policies are read from watch caches that follow
/// the store); returns the last answer. Anything created on the way
/// without settling it is deleted.
async fn create_until(
    ts: &TestServer,
    collection: &str,
    object: Value,
    settled: impl Fn(&Answer) -> bool,
) -> Answer {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    for _ in 0..50 {
        let answer = post_answer(ts, collection, object.clone()).await;
        if settled(&answer) {
            return answer;
        }
        if answer.code == StatusCode::CREATED {
            let path = format!("{collection}/{name}");
            send_answer(ts, Method::DELETE, &path, Some(json!({}))).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    post_answer(ts, collection, object).await
}

/// Creates `object` in the default namespace until a policy refuses it
/// (see [`create_until`]).
async fn create_until_refused(ts: &TestServer, object: Value) -> Answer {
    create_until(ts, DEPLOYMENTS, object, |a| a.code != StatusCode::CREATED).await
}

#[tokio::test]
async fn a_policy_whose_cel_does_not_compile_is_refused_naming_the_expression() {
    let ts = TestServer::new().await;
    let bad = policy(
        "bad",
        json!({"validations": [{"expression": "object.spec.replicas <= 5"},
            {"expression": "object.spec.replicas <"}]}),
    );
    let answer = post_answer(&ts, POLICIES, bad).await;
    answer.assert_status(422, "Invalid");
    let cause = &answer.body["details"]["causes"][0];
    assert_eq!(
        cause["field"], "spec.validations[1].expression",
        "{}",
        answer.body
    );
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: spec.validations[1].expression: Invalid value: \"object.spec.replicas <\": compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>'"),
        "{message}"
    );
    // Names nothing undeclared either: not a typo'd root, not an unknown variable.
    let typo = policy(
        "typo",
        json!({"variables": [{"name": "small", "expression": "object.spec.replicas < 3"}],
            "validations": [{"expression": "objekt.spec.replicas <= 5"},
                {"expression": "variables.big", "messageExpression": "'x' +"}]}),
    );
    let answer = post_answer(&ts, POLICIES, typo).await;
    answer.assert_status(422, "Invalid");
    let fields = strings(&answer.body["details"]["causes"], "field");
    assert_eq!(
        fields,
        [
            "spec.validations[0].expression",
            "spec.validations[1].expression",
            "spec.validations[1].messageExpression"
        ]
    );
    assert!(message_of(&answer.body).contains("undeclared reference to 'objekt'"));
    // Nothing was stored.
    assert_eq!(ts.get(POLICIES).await.1["items"], json!([]));
}

#[tokio::test]
async fn policies_and_bindings_get_upstreams_defaults_and_checks() {
    let ts = TestServer::new().await;
    let created = created_answer(
        &ts,
        POLICIES,
        policy("p", json!({"validations": [{"expression": "true"}]})),
    )
    .await;
    let spec = &created.body["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    assert_eq!(spec["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(spec["matchConstraints"]["namespaceSelector"], json!({}));
    assert_eq!(spec["matchConstraints"]["objectSelector"], json!({}));
    assert_eq!(spec["matchConstraints"]["resourceRules"][0]["scope"], "*");
    let no_actions = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}});
    let answer = post_answer(&ts, BINDINGS, no_actions).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0]["field"],
        "spec.validationActions"
    );
    let bad_ref = binding("b", "p", json!({"paramRef": {"name": "x"}}));
    let answer = post_answer(&ts, BINDINGS, bad_ref).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0]["field"],
        "spec.paramRef.parameterNotFoundAction"
    );
}

#[tokio::test]
async fn a_bound_policy_denies_with_upstreams_wording_and_reason() {
    let ts = server_denying(
        "max-replicas",
        json!({"validations": [{"expression": "object.spec.replicas <= 5"}]}),
    )
    .await;
    let answer = create_until_refused(&ts, deployment("big", 6, json!({}))).await;
    answer.assert_refused(
        422,
        "Invalid",
        "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5",
    );
    assert_eq!(
        answer.body["details"]["causes"][0]["message"],
        "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5"
    );
    let small = created_answer(&ts, DEPLOYMENTS, deployment("small", 5, json!({}))).await;
    // An update past the limit is refused too; the stored object stays.
    let mut grown = small.body.clone();
    grown["spec"]["replicas"] = json!(9);
    let answer = put_answer(&ts, &format!("{DEPLOYMENTS}/small"), grown).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        ts.get(&format!("{DEPLOYMENTS}/small")).await.1["spec"]["replicas"],
        5
    );
    // Other resources are not the policy's business.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(
        post_answer(&ts, "/api/v1/namespaces/default/configmaps", cm)
            .await
            .code,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn message_expressions_and_reasons_shape_the_refusal() {
    let ts = server_denying(
        "named",
        json!({"validations": [{"expression": "object.metadata.name.startsWith('ok-')",
            "messageExpression": "'name ' + object.metadata.name + ' must start with ok-'",
            "message": "static message", "reason": "Forbidden"}]}),
    )
    .await;
    let answer = create_until_refused(&ts, deployment("web", 1, json!({}))).await;
    answer.assert_refused(
        403,
        "Forbidden",
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'named' with binding 'named-binding' denied request: name web must start with ok-",
    );
    let _ok = created_answer(&ts, DEPLOYMENTS, deployment("ok-web", 1, json!({}))).await;
}

#[tokio::test]
async fn warn_and_audit_actions_let_the_write_through_and_say_why() {
    let ts = TestServer::new().await;
    install(
        &ts,
        policy("labelled", json!({"validations": [{"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
            "message": "every deployment needs a team label"}],
            "auditAnnotations": [{"key": "replicas", "valueExpression": "string(object.spec.replicas)"}]})),
        binding("labelled-binding", "labelled", json!({"validationActions": ["Warn", "Audit"]})),
    )
    .await;
    let mut answer = None;
    for i in 0..50 {
        let a = created_answer(&ts, DEPLOYMENTS, deployment(&format!("w{i}"), 2, json!({}))).await;
        if !a.warnings.is_empty() {
            answer = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = answer.expect("a warning");
    assert_eq!(
        answer.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled-binding': every deployment needs a team label"
        ]
    );
    let failure = answer
        .annotations
        .iter()
        .find(|(k, _)| k == "validation.policy.admission.k8s.io/validation_failure")
        .expect("audit annotation");
    let recorded: Value = serde_json::from_str(&failure.1).unwrap();
    assert_eq!(recorded[0]["policy"], "labelled");
    assert_eq!(recorded[0]["binding"], "labelled-binding");
    assert_eq!(
        recorded[0]["message"],
        "every deployment needs a team label"
    );
    assert_eq!(recorded[0]["expressionIndex"], 0);
    assert!(
        answer
            .annotations
            .contains(&("labelled/replicas".to_string(), "2".to_string()))
    );
    // A labelled one passes without a warning.
    let quiet = post_answer(
        &ts,
        DEPLOYMENTS,
        deployment("team", 2, json!({"team": "a"})),
    )
    .await;
    assert_eq!(quiet.code, StatusCode::CREATED);
    assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
}

#[tokio::test]
async fn params_match_conditions_variables_and_selectors_decide() {
    let ts = TestServer::new().await;
    let ns = labelled_namespace("limited", json!({"limits": "on"}));
    created_answer(&ts, "/api/v1/namespaces", ns).await;
    install(
        &ts,
        policy("param-max", json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            // Empty labels are not stored, so the match condition must ask
            // whether there are any, as upstream's docs write it.
            "matchConditions": [{"name": "not-exempt",
                "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}],
            "variables": [{"name": "max", "expression": "int(params.data.max)"}],
            "validations": [{"expression": "object.spec.replicas <= variables.max",
                "messageExpression": "'at most ' + string(variables.max) + ' replicas in ' + namespaceObject.metadata.name"}]})),
        binding("param-max-binding", "param-max", json!({
            "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"limits": "on"}}}})),
    )
    .await;
    let limited = "/apis/apps/v1/namespaces/limited/deployments";
    // No parameter object in the namespace yet: Deny says refuse.
    let answer = create_until(&ts, limited, deployment("d", 1, json!({})), |a| {
        a.code != StatusCode::CREATED
    })
    .await;
    assert_eq!(
        answer.body["message"],
        "deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy 'param-max' with binding 'param-max-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    let params = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"}, "data": {"max": "3"}});
    assert_eq!(
        post_answer(&ts, "/api/v1/namespaces/limited/configmaps", params)
            .await
            .code,
        StatusCode::CREATED
    );
    let answer = create_until(&ts, limited, deployment("d", 4, json!({})), |a| {
        a.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most"))
    })
    .await;
    assert!(
        message_of(&answer.body).ends_with("denied request: at most 3 replicas in limited"),
        "{}",
        answer.body
    );
    let _fits = created_answer(&ts, limited, deployment("fits", 3, json!({}))).await;
    // The match condition exempts; the namespace selector leaves other namespaces alone.
    let _exempt = created_answer(
        &ts,
        limited,
        deployment("exempt", 9, json!({"exempt": "yes"})),
    )
    .await;
    let _elsewhere = created_answer(&ts, DEPLOYMENTS, deployment("elsewhere", 9, json!({}))).await;
}

#[tokio::test]
async fn errors_and_runaway_expressions_fail_closed_under_fail_and_open_under_ignore() {
    // A field the object lacks: a runtime error, so Fail refuses.
    let ts = server_denying(
        "strict",
        json!({"validations": [{"expression": "object.spec.missing.size() == 0"}]}),
    )
    .await;
    let answer = create_until_refused(&ts, deployment("d", 1, json!({}))).await;
    answer.assert_status(422, "Invalid");
    assert_mentions(
        &answer.body,
        &[
            "denied request: expression 'object.spec.missing.size() == 0' resulted in error: no such key: missing",
        ],
    );
    // Under Ignore the same error lets the write through.
    let mut ignore = ts.get(&format!("{POLICIES}/strict")).await.1;
    ignore["spec"]["failurePolicy"] = json!("Ignore");
    let put = put_answer(&ts, &format!("{POLICIES}/strict"), ignore).await;
    assert_eq!(put.code, StatusCode::OK, "{}", put.body);
    let created = create_until(&ts, DEPLOYMENTS, deployment("d", 1, json!({})), |a| {
        a.code == StatusCode::CREATED
    })
    .await;
    assert_eq!(
        created.code,
        StatusCode::CREATED,
        "Ignore lets an erroring policy through: {}",
        created.body
    );
    // A hostile expression (a hundred million iterations) is cut off by the
    // budget and refused quickly rather than holding the server.
    install(
        &ts,
        policy("hostile", json!({"validations": [{"expression":
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, [1,2,3,4,5,6,7,8,9,10].all(g, [1,2,3,4,5,6,7,8,9,10].all(h, a + b + c + d + e + f + g + h > 0))))))))"}]})),
        binding("hostile-binding", "hostile", json!({})),
    )
    .await;
    let started = std::time::Instant::now();
    let answer = create_until_refused(&ts, deployment("h", 1, json!({}))).await;
    answer.assert_status(422, "Invalid");
    assert_mentions(&answer.body, &["hostile", "operation cancelled"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_request_variable_says_whether_the_write_is_a_dry_run() {
    let ts = server_denying(
        "no-dry-runs",
        json!({"validations": [{"expression": "!request.dryRun", "message": "no dry runs here"}]}),
    )
    .await;
    let dry = json!({"metadata": {"name": "dry"}});
    let mut refused = None;
    for _ in 0..50 {
        let answer = post_answer(
            &ts,
            &format!("{DEPLOYMENTS}?dryRun=All"),
            deployment("dry", 1, dry["metadata"]["labels"].clone()),
        )
        .await;
        if answer.code != StatusCode::CREATED {
            refused = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = refused.expect("the policy never refused the dry run");
    refused.assert_status(422, "Invalid");
    assert!(
        message_of(&refused.body).ends_with("denied request: no dry runs here"),
        "{}",
        refused.body
    );
    let _real = created_answer(&ts, DEPLOYMENTS, deployment("real", 1, json!({}))).await;
}
