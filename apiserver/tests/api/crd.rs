//! CustomResourceDefinitions end to end over the router: establishing,
//! discovery, CRUD/list/watch of custom objects, tables with printer
//! columns, schema validation, pruning and defaults, status and scale,
//! several versions, name conflicts, deletion and restarts.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};
use skiff_store::Store;

use crate::harness::{
    Client, Expect, KeptStore, TestServer, assert_mentions, columns, eventually, find_by, find_in,
    message_of, refused, strings,
};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

/// A namespaced Widget CRD with a schema that exercises validation,
/// defaults, pruning, printer columns and both subresources.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "replicas": {"type": "integer", "default": 1},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "selector": {"type": "string"},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "status": {"type": "object", "properties": {
                        "ready": {"type": "integer"},
                        "selector": {"type": "string"},
                        "phase": {"type": "string"}}}}}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.ready",
                    "labelSelectorPath": ".status.selector"}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
            }]
        }
    })
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "labels": {"app": name}}, "spec": spec})
}

/// The CRD once its Established condition is True (panics after 5 s).
async fn established(s: &TestServer, name: &str) -> Value {
    condition(s, name, "Established", "True").await
}

async fn condition(s: &TestServer, name: &str, ty: &str, status: &str) -> Value {
    s.get_until(&format!("{CRDS}/{name}"), |crd| {
        crd["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == status))
    })
    .await
}

async fn install(s: &TestServer, crd: Value) -> Value {
    let name = crd["metadata"]["name"].as_str().unwrap().to_string();
    s.created(CRDS, crd).await;
    established(s, &name).await
}

#[tokio::test]
async fn a_new_crd_is_established_and_discoverable() {
    let s = TestServer::new().await;
    let crd = install(&s, widget_crd()).await;
    let status = &crd["status"];
    assert_eq!(status["acceptedNames"]["kind"], "Widget");
    assert_eq!(status["acceptedNames"]["shortNames"], json!(["wd"]));
    assert_eq!(status["storedVersions"], json!(["v1"]));
    let names_accepted = find_by(&status["conditions"], "type", "NamesAccepted");
    assert_eq!(names_accepted["status"], "True");
    assert_eq!(
        crd["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");

    let (_, groups) = s.get("/apis").await;
    let group = find_in(
        &groups["groups"],
        |g| g["name"] == "example.com",
        "example.com in /apis",
    );
    assert_eq!(group["preferredVersion"]["groupVersion"], "example.com/v1");
    let resources = s.get_ok("/apis/example.com/v1").await;
    let names: Vec<&str> = strings(&resources["resources"], "name");
    assert_eq!(names, vec!["widgets", "widgets/status", "widgets/scale"]);
    let main = &resources["resources"][0];
    assert_eq!(main["kind"], "Widget");
    assert_eq!(main["namespaced"], true);
    assert_eq!(main["shortNames"], json!(["wd"]));
    assert_eq!(main["categories"], json!(["all"]));
    assert_eq!(resources["resources"][2]["kind"], "Scale");
}

#[tokio::test]
async fn discovery_names_the_declared_singular() {
    let s = TestServer::new().await;
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gizmo", "kind": "Gadget"});
    install(&s, crd).await;
    let (_, resources) = s.get("/apis/example.com/v1").await;
    let gadgets = find_in(
        &resources["resources"],
        |r| r["name"] == "gadgets",
        "gadgets in discovery",
    );
    assert_eq!(gadgets["singularName"], "gizmo");
}

#[tokio::test]
async fn openapi_v3_carries_the_declared_schema() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let doc = s.get_ok("/openapi/v3/apis/example.com/v1").await;
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        widget["properties"]["spec"]["properties"]["size"]["type"], "integer",
        "{widget}"
    );
    assert_eq!(
        widget["x-kubernetes-group-version-kind"][0]["kind"], "Widget",
        "{widget}"
    );
}

#[tokio::test]
async fn custom_objects_support_crud_selectors_and_watch() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let mut watch = s.watch(&format!("{WIDGETS}?watch=1")).await;
    let a = s.created(WIDGETS, widget("a", json!({"size": 2}))).await;
    assert_eq!(a["metadata"]["generation"], 1);
    assert!(a["metadata"]["uid"].is_string());
    assert_eq!(watch.next_summary().await, ("ADDED".into(), "a".into()));
    s.created(WIDGETS, widget("b", json!({"size": 3}))).await;
    let dup = s
        .post(WIDGETS, widget("b", json!({"size": 3})))
        .await
        .expect_failure(409, "AlreadyExists");
    assert_eq!(dup["details"]["group"], "example.com");
    assert_eq!(dup["message"], "widgets.example.com \"b\" already exists");

    let list = s.get_ok(WIDGETS).await;
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let (_, by_label) = s.get(&format!("{WIDGETS}?labelSelector=app%3Db")).await;
    assert_eq!(by_label["items"].as_array().unwrap().len(), 1);
    assert_eq!(by_label["items"][0]["metadata"]["name"], "b");
    let (_, by_field) = s
        .get(&format!("{WIDGETS}?fieldSelector=metadata.name%3Da"))
        .await;
    assert_eq!(by_field["items"].as_array().unwrap().len(), 1);
    let (_, all) = s.get("/apis/example.com/v1/widgets").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2);

    let mut changed = a.clone();
    changed["spec"]["size"] = json!(5);
    let updated = s.put_ok(&format!("{WIDGETS}/a"), changed).await;
    assert_eq!(updated["spec"]["size"], 5);
    assert_eq!(updated["metadata"]["generation"], 2);
    s.put(&format!("{WIDGETS}/a"), a.clone())
        .await
        .expect_failure(409, "Conflict");
    let patched = s
        .merge_patch_ok(&format!("{WIDGETS}/a"), json!({"spec": {"size": 6}}))
        .await;
    assert_eq!(patched["spec"]["size"], 6);
    assert_eq!(watch.next_summary().await, ("ADDED".into(), "b".into()));
    assert_eq!(watch.next_summary().await, ("MODIFIED".into(), "a".into()));

    s.delete_ok(&format!("{WIDGETS}/a")).await;
    assert_eq!(watch.next_summary().await, ("MODIFIED".into(), "a".into()));
    assert_eq!(watch.next_summary().await, ("DELETED".into(), "a".into()));
    s.get_not_found(&format!("{WIDGETS}/a")).await;
}

#[tokio::test]
async fn cluster_scoped_resources_live_outside_namespaces() {
    let s = TestServer::new().await;
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gizmos.example.com");
    crd["spec"]["scope"] = json!("Cluster");
    crd["spec"]["names"] = json!({"plural": "gizmos", "kind": "Gizmo"});
    install(&s, crd).await;
    let gizmo = json!({"apiVersion": "example.com/v1", "kind": "Gizmo",
        "metadata": {"name": "g1"}, "spec": {"size": 1}});
    let created = s.created("/apis/example.com/v1/gizmos", gizmo).await;
    assert!(created["metadata"].get("namespace").is_none());
    s.get_ok("/apis/example.com/v1/gizmos/g1").await;
    s.get_not_found("/apis/example.com/v1/namespaces/default/gizmos/g1")
        .await;
}

#[tokio::test]
async fn tables_use_the_printer_columns() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    s.post(WIDGETS, widget("a", json!({"size": 4}))).await;
    let table = s.get_table(WIDGETS).await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(columns(&table), vec!["Name", "Size", "Phase", "Age"]);
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(cells[0], "a");
    assert_eq!(cells[1], 4);
    assert_eq!(cells[2], Value::Null);
    assert!(cells[3].as_str().unwrap().ends_with('s'), "{cells:?}");
    assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "a");

    // `kubectl get -w` prints the same columns.
    let mut watch = s.watch_tables(&format!("{WIDGETS}?watch=1")).await;
    let event = watch.next().await.expect("an ADDED event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(
        columns(&event["object"]),
        vec!["Name", "Size", "Phase", "Age"]
    );
    assert_eq!(event["object"]["rows"][0]["cells"][1], 4);
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_field_paths() {
    let s = TestServer::new().await;
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("wrong.example.com");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] =
        json!({"minimum": 1});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["labels"] = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"}});
    let body = s.post(CRDS, crd).await.expect_failure(422, "Invalid");
    let fields: Vec<&str> = strings(&body["details"]["causes"], "field");
    let schema = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
    assert!(fields.contains(&"metadata.name"), "{fields:?}");
    assert!(
        fields.contains(&format!("{schema}.properties[size].type").as_str()),
        "{fields:?}"
    );
    assert!(
        fields.contains(&format!("{schema}.properties[labels].additionalProperties").as_str()),
        "{fields:?}"
    );
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "CustomResourceDefinition.apiextensions.k8s.io \"wrong.example.com\" is invalid"
        ),
        "{body}"
    );

    let mut no_storage = widget_crd();
    no_storage["spec"]["versions"][0]["storage"] = json!(false);
    s.post(CRDS, no_storage).await.expect_mentions(
        422,
        "Invalid",
        &["must have exactly one version marked as storage version"],
    );
    assert!(
        !s.keys()
            .await
            .iter()
            .any(|k| k.contains("customresourcedefinitions")),
        "nothing stored"
    );
    s.get_not_found("/apis/example.com/v1").await;
}

#[tokio::test]
async fn invalid_objects_are_422_with_every_field_and_not_stored() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let body = s
        .post(
            WIDGETS,
            widget(
                "bad",
                json!({"size": "big", "color": "green", "replicas": 2}),
            ),
        )
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(body["details"]["kind"], "Widget");
    assert_eq!(body["details"]["group"], "example.com");
    assert!(
        message_of(&body).starts_with("Widget.example.com \"bad\" is invalid: ["),
        "{body}"
    );
    assert_mentions(
        &body,
        &[
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
            "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
        ],
    );
    let body = s
        .post(WIDGETS, widget("bad", json!({"replicas": 2})))
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(body["details"]["causes"][0]["field"], "spec.size");
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueRequired");
    s.post(WIDGETS, widget("bad", json!({"size": 11})))
        .await
        .expect_mentions(422, "Invalid", &["should be less than or equal to 10"]);
    assert!(
        !s.keys().await.iter().any(|k| k.contains("/widgets/")),
        "nothing stored"
    );

    let (_, good) = s.post(WIDGETS, widget("good", json!({"size": 1}))).await;
    let mut bad_update = good.clone();
    bad_update["spec"]["size"] = json!(0);
    s.put(&format!("{WIDGETS}/good"), bad_update)
        .await
        .expect_failure(422, "Invalid");
    let (_, stored) = s.get(&format!("{WIDGETS}/good")).await;
    assert_eq!(stored["spec"]["size"], 1);
}

#[tokio::test]
async fn unknown_fields_are_pruned_and_defaults_applied() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let mut object = widget(
        "p",
        json!({"size": 2, "bogus": true, "extra": {"free": {"form": 1}}}),
    );
    object["topLevel"] = json!("dropped");
    let created = s.created(WIDGETS, object).await;
    assert_eq!(
        created["spec"],
        json!({"size": 2, "replicas": 1, "color": "red", "extra": {"free": {"form": 1}}})
    );
    assert!(created.get("topLevel").is_none());

    // A default added later shows on objects stored before it.
    let (_, mut crd) = s.get(&format!("{CRDS}/widgets.example.com")).await;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["shape"] =
        json!({"type": "string", "default": "round"});
    s.put_ok(&format!("{CRDS}/widgets.example.com"), crd).await;
    // The new default appears on read.
    s.get_until(&format!("{WIDGETS}/p"), |got| {
        got["spec"]["shape"] == "round"
    })
    .await;
}

#[tokio::test]
async fn strict_field_validation_names_fields_the_schema_lacks() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    refused(
        s.post(
            &format!("{WIDGETS}?fieldValidation=Strict"),
            widget(
                "strict",
                json!({"size": 2, "bogus": 1, "extra": {"kept": true}}),
            ),
        )
        .await,
        400,
        "BadRequest",
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\"",
    );
    assert!(!s.keys().await.iter().any(|k| k.contains("/widgets/")));
    let created = s
        .created(
            &format!("{WIDGETS}?fieldValidation=Ignore"),
            widget("strict", json!({"size": 2, "bogus": 1})),
        )
        .await;
    assert!(created["spec"].get("bogus").is_none());
}

#[tokio::test]
async fn status_and_scale_subresources() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let (_, w) = s
        .post(WIDGETS, {
            let mut w = widget("s", json!({"size": 2, "replicas": 2}));
            w["status"] = json!({"phase": "ignored on create"});
            w
        })
        .await;
    assert!(w.get("status").is_none(), "{w}");
    let mut with_status = w.clone();
    with_status["status"] = json!({"ready": 2, "selector": "app=s", "phase": "Running"});
    with_status["spec"]["size"] = json!(9);
    let after = s
        .put_ok(&format!("{WIDGETS}/s/status"), with_status.clone())
        .await;
    assert_eq!(after["status"]["phase"], "Running");
    assert_eq!(after["spec"]["size"], 2, "status writes ignore spec");
    let mut main = after.clone();
    main["status"]["phase"] = json!("Hacked");
    let after = s.put_ok(&format!("{WIDGETS}/s"), main).await;
    assert_eq!(
        after["status"]["phase"], "Running",
        "main writes ignore status"
    );

    let scale = s.get_ok(&format!("{WIDGETS}/s/scale")).await;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=s"}));
    let scaled = s
        .merge_patch_ok(
            &format!("{WIDGETS}/s/scale"),
            json!({"spec": {"replicas": 7}}),
        )
        .await;
    assert_eq!(scaled["spec"]["replicas"], 7);
    let (_, got) = s.get(&format!("{WIDGETS}/s")).await;
    assert_eq!(got["spec"]["replicas"], 7);
    assert_eq!(got["metadata"]["generation"], 2);
}

#[tokio::test]
async fn several_versions_share_the_storage_version() {
    let s = TestServer::new().await;
    let mut crd = widget_crd();
    let mut beta = crd["spec"]["versions"][0].clone();
    beta["name"] = json!("v1beta1");
    beta["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(beta);
    let crd = install(&s, crd).await;
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let (_, group) = s.get("/apis/example.com").await;
    assert_eq!(
        group["versions"],
        json!([{"groupVersion": "example.com/v1", "version": "v1"},
            {"groupVersion": "example.com/v1beta1", "version": "v1beta1"}])
    );
    let beta_path = "/apis/example.com/v1beta1/namespaces/default/widgets";
    let mut object = widget("multi", json!({"size": 3}));
    object["apiVersion"] = json!("example.com/v1beta1");
    let created = s.created(beta_path, object).await;
    assert_eq!(created["apiVersion"], "example.com/v1beta1");
    let raw = s
        .store
        .get("/registry/example.com/widgets/default/multi")
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&raw.value).unwrap();
    assert_eq!(stored["apiVersion"], "example.com/v1");
    let (_, as_v1) = s.get(&format!("{WIDGETS}/multi")).await;
    assert_eq!(as_v1["apiVersion"], "example.com/v1");
    let (_, listed) = s.get(beta_path).await;
    assert_eq!(listed["items"][0]["apiVersion"], "example.com/v1beta1");
}

#[tokio::test]
async fn conflicting_names_are_not_accepted() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    let mut other = widget_crd();
    other["metadata"]["name"] = json!("gadgets.example.com");
    other["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget", "shortNames": ["wd"]});
    s.created(CRDS, other).await;
    let crd = condition(&s, "gadgets.example.com", "NamesAccepted", "False").await;
    let names = find_by(&crd["status"]["conditions"], "type", "NamesAccepted");
    assert_eq!(names["reason"], "ShortNamesConflict");
    assert_eq!(names["message"], "\"wd\" is already in use");
    s.get_not_found("/apis/example.com/v1/gadgets").await;
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_and_stops_serving() {
    let s = TestServer::new().await;
    install(&s, widget_crd()).await;
    for name in ["x", "y"] {
        s.created(WIDGETS, widget(name, json!({"size": 1}))).await;
    }
    s.delete_ok(&format!("{CRDS}/widgets.example.com")).await;
    eventually(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            match s.get(&format!("{CRDS}/widgets.example.com")).await {
                (StatusCode::NOT_FOUND, _) => Ok(()),
                (code, _) => Err(format!("the CRD went once its objects did: still {code}")),
            }
        },
    )
    .await;
    assert!(
        !s.keys().await.iter().any(|k| k.contains("/widgets/")),
        "objects deleted"
    );
    s.get_not_found(WIDGETS).await;
    s.get_not_found("/apis/example.com/v1").await;
}

#[tokio::test]
async fn custom_resources_survive_a_restart() {
    let disk = KeptStore::new();
    {
        let s = disk.start().await;
        install(&s, widget_crd()).await;
        s.created(WIDGETS, widget("kept", json!({"size": 2}))).await;
        s.stop().await;
    }
    let s = disk.start().await;
    // Served from the first request: no waiting for the controller.
    let kept = s.get_ok(&format!("{WIDGETS}/kept")).await;
    assert_eq!(kept["spec"]["size"], 2);
    assert_eq!(kept["spec"]["replicas"], 1);
}

/// kube-rs with `#[derive(CustomResource)]`: install the generated CRD, wait
/// for Established, then follow the objects with `kube::runtime::watcher`.
mod kube_rs {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use kube::runtime::wait::{await_condition, conditions};
    use kube::runtime::{WatchStreamExt, watcher};
    use kube::{CustomResource, CustomResourceExt};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;
    use skiff_apiserver::authn::UserInfo;

    use crate::harness::TestServer;

    /// A knob that can be turned.
    #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    #[kube(
        group = "kube.example.com",
        version = "v1",
        kind = "Knob",
        namespaced,
        status = "KnobStatus",
        shortname = "kn",
        printcolumn = r#"{"name":"Turns","type":"integer","jsonPath":".spec.turns"}"#
    )]
    pub struct KnobSpec {
        pub turns: i32,
        pub label: Option<String>,
    }

    /// What the knob reports.
    #[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
    pub struct KnobStatus {
        pub settled: bool,
    }

    fn knob(name: &str, turns: i32) -> Knob {
        Knob::new(name, KnobSpec { turns, label: None })
    }

    #[tokio::test]
    async fn derived_crd_installs_and_its_objects_can_be_watched() {
        let s = TestServer::new().await;
        let client = skiff_apiserver::inprocess::client(
            s.router.clone(),
            UserInfo::new("system:test", Vec::new()),
        );
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &Knob::crd())
            .await
            .expect("the derived CRD is accepted");
        tokio::time::timeout(
            Duration::from_secs(10),
            await_condition(
                crds,
                "knobs.kube.example.com",
                conditions::is_crd_established(),
            ),
        )
        .await
        .expect("established in time")
        .expect("wait succeeded");

        let knobs: Api<Knob> = Api::namespaced(client, "default");
        knobs
            .create(&PostParams::default(), &knob("first", 1))
            .await
            .unwrap();
        let mut seen = watcher(knobs.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        let first = tokio::time::timeout(Duration::from_secs(5), seen.next())
            .await
            .expect("initial object")
            .unwrap()
            .unwrap();
        assert_eq!(first.spec.turns, 1);

        knobs
            .create(&PostParams::default(), &knob("second", 2))
            .await
            .unwrap();
        let status = json!({"status": {"settled": true}});
        let patched = knobs
            .patch_status("first", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        assert!(patched.status.unwrap().settled);
        let mut names = BTreeSet::new();
        while names.len() < 2 {
            let k = tokio::time::timeout(Duration::from_secs(5), seen.next())
                .await
                .expect("watch event")
                .unwrap()
                .unwrap();
            names.insert(k.metadata.name.unwrap());
        }
        assert_eq!(
            names,
            BTreeSet::from(["first".to_string(), "second".to_string()])
        );
        let listed = knobs.list(&Default::default()).await.unwrap();
        assert_eq!(listed.items.len(), 2);
        assert_eq!(listed.items[0].spec.turns, 1);
    }
}

/// A Widget CRD whose schema carries `x-kubernetes-validations` rules: a
/// cross-field rule reported at `spec.replicas` and a transition rule.
fn ruled_crd() -> Value {
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["maxReplicas"] =
        json!({"type": "integer"});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "!has(self.maxReplicas) || self.replicas <= self.maxReplicas",
            "message": "must be at most maxReplicas", "fieldPath": ".replicas"},
        {"rule": "self.size >= oldSelf.size", "messageExpression": "'size may not shrink below ' + string(oldSelf.size)"}
    ]);
    crd
}

#[tokio::test]
async fn validation_rules_refuse_custom_objects_at_the_rules_path() {
    let s = TestServer::new().await;
    install(&s, ruled_crd()).await;
    let body = refused(
        s.post(
            WIDGETS,
            widget("w", json!({"size": 3, "replicas": 7, "maxReplicas": 5})),
        )
        .await,
        422,
        "Invalid",
        "Widget.example.com \"w\" is invalid: spec.replicas: Invalid value: \"object\": must be at most maxReplicas",
    );
    assert_eq!(body["details"]["causes"][0]["field"], "spec.replicas");
    let created = s
        .created(
            WIDGETS,
            widget("w", json!({"size": 3, "replicas": 2, "maxReplicas": 5})),
        )
        .await;
    // The transition rule sees the stored object on update.
    let mut shrunk = created.clone();
    shrunk["spec"]["size"] = json!(2);
    refused(
        s.put(&format!("{WIDGETS}/w"), shrunk).await,
        422,
        "Invalid",
        "Widget.example.com \"w\" is invalid: spec: Invalid value: \"object\": size may not shrink below 3",
    );
    let mut grown = created;
    grown["spec"]["size"] = json!(4);
    s.put_ok(&format!("{WIDGETS}/w"), grown).await;
}

#[tokio::test]
async fn a_crd_whose_rule_does_not_compile_is_refused() {
    let s = TestServer::new().await;
    let mut crd = ruled_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        [0]["rule"] = json!("self.replicas <=");
    let body = s.post(CRDS, crd).await.expect_failure(422, "Invalid");
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    assert_mentions(
        &body,
        &["Invalid value: \"self.replicas <=\": compilation failed: ERROR: <input>"],
    );
    assert_eq!(
        s.get(&format!("{CRDS}/widgets.example.com")).await.0,
        StatusCode::NOT_FOUND
    );
}
