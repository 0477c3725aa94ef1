use http::{Method, StatusCode};
use serde_json::json;

use crate::harness::{
    Client, Expect, TestServer, assert_same_version, deployment, forbidden, refused,
};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn system_namespaces_exist_on_a_fresh_server() {
    let s = TestServer::new().await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let body = s.get_ok(&format!("/api/v1/namespaces/{ns}")).await;
        assert_eq!(body["status"]["phase"], "Active");
        assert_eq!(body["spec"]["finalizers"], json!(["kubernetes"]));
    }
}

#[tokio::test]
async fn create_get_update_round_trip_sets_metadata() {
    let s = TestServer::new().await;
    let created = s.configmap("default", "cm", json!({"a": "b"})).await;
    let meta = &created["metadata"];
    assert!(meta["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(
        meta["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let rv = meta["resourceVersion"].as_str().unwrap().to_string();
    assert!(
        meta.get("generation").is_none(),
        "configmaps do not track generation"
    );
    assert_eq!(meta["managedFields"][0]["manager"], "skiff-tests");

    let got = s.get_ok(&format!("{CMS}/cm")).await;
    assert_eq!(got["metadata"]["resourceVersion"], rv);
    assert_eq!(got["data"]["k"], "v");
    assert_eq!(got["kind"], "ConfigMap");

    let mut changed = got.clone();
    changed["data"]["k"] = json!("w");
    let updated = s.put_ok(&format!("{CMS}/cm"), changed.clone()).await;
    assert_ne!(updated["metadata"]["resourceVersion"], rv);
    assert_eq!(updated["metadata"]["uid"], meta["uid"]);

    // The stale resourceVersion now conflicts, with upstream's message.
    let body = refused(
        s.put(&format!("{CMS}/cm"), changed).await,
        409,
        "Conflict",
        "Operation cannot be fulfilled on configmaps \"cm\": the object has been modified; please apply your changes to the latest version and try again",
    );
    assert_eq!(body["details"]["name"], "cm");
    assert_eq!(body["details"]["kind"], "configmaps");

    // Without a resourceVersion the update is unconditional.
    let mut blind = updated.clone();
    blind["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    blind["data"]["k"] = json!("x");
    let body = s.put_ok(&format!("{CMS}/cm"), blind).await;
    assert_eq!(body["data"]["k"], "x");
}

#[tokio::test]
async fn no_op_update_keeps_resource_version() {
    let s = TestServer::new().await;
    let created = s.configmap("default", "same", json!({})).await;
    let body = s.put_ok(&format!("{CMS}/same"), created.clone()).await;
    assert_same_version(&body, &created);
}

/// Every ObjectMeta field is `omitempty` upstream: what a client sends
/// empty is neither stored nor served, and adding it empty changes nothing.
#[tokio::test]
async fn empty_metadata_fields_are_left_out_as_upstream_encodes_them() {
    let s = TestServer::new().await;
    let created = s
        .created(
            CMS,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bare", "labels": {}, "annotations": {},
                    "finalizers": [], "ownerReferences": [], "generateName": ""}}),
        )
        .await;
    let path = format!("{CMS}/bare");
    for body in [created.clone(), s.get_ok(&path).await] {
        let meta = body["metadata"].as_object().expect("metadata");
        for field in [
            "labels",
            "annotations",
            "finalizers",
            "ownerReferences",
            "generateName",
        ] {
            assert!(!meta.contains_key(field), "{field} left in {body}");
        }
    }
    // kubectl diff's dry-run patch adds `annotations: {}`: no change, so
    // neither a new resourceVersion nor a field in the answer.
    let (code, patched) = s
        .merge_patch(
            &path,
            json!({"metadata": {"annotations": {}, "labels": {}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{patched}");
    assert_eq!(patched["metadata"], created["metadata"]);
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let s = TestServer::new().await;
    let body = json!({"metadata": {"generateName": "gen-"}, "data": {}});
    let (c1, a) = s.post(CMS, body.clone()).await;
    let (c2, b) = s.post(CMS, body).await;
    assert_eq!((c1, c2), (StatusCode::CREATED, StatusCode::CREATED));
    let (na, nb) = (
        a["metadata"]["name"].as_str().unwrap(),
        b["metadata"]["name"].as_str().unwrap(),
    );
    assert!(na.starts_with("gen-") && na.len() == 9);
    assert_ne!(na, nb);
    assert_eq!(a["metadata"]["generateName"], "gen-");
}

#[tokio::test]
async fn generation_tracks_spec_changes_only() {
    let s = TestServer::new().await;
    let d = s
        .created(
            "/apis/apps/v1/namespaces/default/deployments",
            deployment("web", 1),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(
        d["spec"]["strategy"]["type"], "RollingUpdate",
        "defaults applied"
    );

    let mut labelled = d.clone();
    labelled["metadata"]["labels"] = json!({"x": "y"});
    let (_, d2) = s
        .put("/apis/apps/v1/namespaces/default/deployments/web", labelled)
        .await;
    assert_eq!(d2["metadata"]["generation"], 1, "{d2}");

    let mut scaled = d2.clone();
    scaled["spec"]["replicas"] = json!(3);
    let (_, d3) = s
        .put("/apis/apps/v1/namespaces/default/deployments/web", scaled)
        .await;
    assert_eq!(d3["metadata"]["generation"], 2);
    assert_eq!(d3["spec"]["replicas"], 3);
}

#[tokio::test]
async fn endpointslice_generation_counts_endpoints_ports_and_labels() {
    let s = TestServer::new().await;
    const SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-1";
    let slice = s
        .created(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            json!({"metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
                   "addressType": "IPv4",
                   "endpoints": [{"addresses": ["10.42.0.5"]}],
                   "ports": [{"port": 80}]}),
        )
        .await;
    assert_eq!(slice["metadata"]["generation"], 1, "{slice}");

    // Metadata other than labels is not a new generation.
    let mut annotated = slice.clone();
    annotated["metadata"]["annotations"] = json!({"note": "x"});
    let (_, annotated) = s.put(SLICE, annotated).await;
    assert_eq!(annotated["metadata"]["generation"], 1, "{annotated}");

    let mut moved = annotated.clone();
    moved["endpoints"][0]["addresses"] = json!(["10.42.0.6"]);
    let (_, moved) = s.put(SLICE, moved).await;
    assert_eq!(moved["metadata"]["generation"], 2, "{moved}");

    let mut relabelled = moved.clone();
    relabelled["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = json!("me");
    let (_, relabelled) = s.put(SLICE, relabelled).await;
    assert_eq!(relabelled["metadata"]["generation"], 3, "{relabelled}");

    // The same object again, its port's defaults written out: no change.
    let (_, same) = s.put(SLICE, relabelled.clone()).await;
    assert_eq!(same["metadata"]["generation"], 3, "{same}");
}

#[tokio::test]
async fn yaml_bodies_are_accepted() {
    let s = TestServer::new().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: \"1\"\n";
    let body = s
        .raw(Method::POST, CMS, "application/yaml", yaml.into())
        .await
        .expect_code(StatusCode::CREATED);
    assert_eq!(body["data"]["a"], "1");
}

#[tokio::test]
async fn namespace_must_exist_and_not_be_terminating() {
    let s = TestServer::new().await;
    let cm = json!({"metadata": {"name": "x"}});
    refused(
        s.post("/api/v1/namespaces/nope/configmaps", cm.clone())
            .await,
        404,
        "NotFound",
        "namespaces \"nope\" not found",
    );

    s.namespace("doomed").await;
    let ns = s.delete_ok("/api/v1/namespaces/doomed").await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    let body = forbidden(
        s.post("/api/v1/namespaces/doomed/configmaps", cm).await,
        "configmaps \"x\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
    );
    assert_eq!(
        body["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
}

#[tokio::test]
async fn cluster_scoped_resources_have_no_namespace() {
    let s = TestServer::new().await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "namespace": "ignored"},
        "status": {"capacity": {"cpu": "2"}}});
    let body = s.created("/api/v1/nodes", node).await;
    assert!(body["metadata"].get("namespace").is_none());
    assert_eq!(
        body["status"]["capacity"]["cpu"], "2",
        "node status is kept on create"
    );
    assert!(
        s.keys()
            .await
            .contains(&"/registry/core/nodes/n1".to_string())
    );
    s.get_not_found("/api/v1/namespaces/default/nodes/n1").await;
}

#[tokio::test]
async fn storage_layout_and_value_without_resource_version() {
    let s = TestServer::new().await;
    s.configmap("default", "stored", json!({})).await;
    let key = "/registry/core/configmaps/default/stored";
    assert!(s.keys().await.contains(&key.to_string()));
    s.created(
        "/apis/apps/v1/namespaces/default/deployments",
        deployment("d", 1),
    )
    .await;
    assert!(
        s.keys()
            .await
            .contains(&"/registry/apps/deployments/default/d".to_string())
    );
    use skiff_store::Store;
    let kv = s.store.get(key).await.unwrap().unwrap();
    let raw: serde_json::Value = serde_json::from_slice(&kv.value).unwrap();
    assert!(raw["metadata"].get("resourceVersion").is_none());
}

#[tokio::test]
async fn dry_run_create_and_update_store_nothing() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let body = s
        .created(
            &format!("{CMS}?dryRun=All"),
            json!({"metadata": {"name": "dry"}}),
        )
        .await;
    assert!(body["metadata"]["uid"].is_string());
    assert_eq!(s.keys().await, before);
    let created = s.configmap("default", "real", json!({})).await;
    let mut changed = created.clone();
    changed["data"] = json!({"k": "dry"});
    let body = s.put_ok(&format!("{CMS}/real?dryRun=All"), changed).await;
    assert_eq!(body["data"]["k"], "dry");
    let (_, now) = s.get(&format!("{CMS}/real")).await;
    assert_eq!(now["data"]["k"], "v");
    assert_same_version(&now, &created);
}

#[tokio::test]
async fn events_are_shared_between_core_and_events_api() {
    let s = TestServer::new().await;
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "me", "reportingInstance": "i",
        "action": "Do", "reason": "Because", "note": "hello", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}});
    s.created("/apis/events.k8s.io/v1/namespaces/default/events", ev)
        .await;
    let core = s.get_ok("/api/v1/namespaces/default/events/e1").await;
    assert_eq!(core["message"], "hello");
    assert_eq!(core["involvedObject"]["name"], "p");
    let (_, list) = s
        .get("/api/v1/events?fieldSelector=involvedObject.name%3Dp")
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn services_get_cluster_ips_and_node_ports() {
    let s = TestServer::new().await;
    let svc = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"type": "NodePort", "selector": {"app": "x"},
            "ports": [{"port": 80}]}})
    };
    let a = s
        .created("/api/v1/namespaces/default/services", svc("a"))
        .await;
    let (_, b) = s
        .post("/api/v1/namespaces/default/services", svc("b"))
        .await;
    let ip_a = a["spec"]["clusterIP"].as_str().unwrap();
    assert!(ip_a.starts_with("10.43."), "{ip_a}");
    assert_ne!(ip_a, b["spec"]["clusterIP"].as_str().unwrap());
    assert_eq!(a["spec"]["clusterIPs"], json!([ip_a]));
    let port = a["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&port));
    assert_ne!(Some(port), b["spec"]["ports"][0]["nodePort"].as_u64());
    assert_eq!(a["spec"]["ports"][0]["targetPort"], 80);

    // Taken addresses are refused; updates that omit them keep them.
    let mut taken = svc("c");
    taken["spec"]["clusterIP"] = json!(ip_a);
    s.post("/api/v1/namespaces/default/services", taken)
        .await
        .expect_failure(422, "Invalid");
    let mut replaced = a.clone();
    replaced["spec"]
        .as_object_mut()
        .unwrap()
        .remove("clusterIP");
    replaced["spec"]
        .as_object_mut()
        .unwrap()
        .remove("clusterIPs");
    replaced["spec"]["ports"] = json!([{"port": 80}]);
    let body = s
        .put_ok("/api/v1/namespaces/default/services/a", replaced)
        .await;
    assert_eq!(body["spec"]["clusterIP"], ip_a);
    assert_eq!(body["spec"]["ports"][0]["nodePort"], port);
    let mut moved = body.clone();
    moved["spec"]["clusterIP"] = json!("10.43.99.99");
    s.put("/api/v1/namespaces/default/services/a", moved)
        .await
        .expect_failure(422, "Invalid");
}

#[tokio::test]
async fn pods_get_service_account_and_priority() {
    let s = TestServer::new().await;
    let pod = |name: &str, class: Option<&str>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let Some(c) = class {
            spec["priorityClassName"] = json!(c);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    let plain = s
        .created("/api/v1/namespaces/default/pods", pod("plain", None))
        .await;
    assert_eq!(plain["spec"]["serviceAccountName"], "default");
    assert_eq!(plain["spec"]["priority"], 0);
    let critical = s
        .created(
            "/api/v1/namespaces/default/pods",
            pod("critical", Some("system-node-critical")),
        )
        .await;
    assert_eq!(critical["spec"]["priority"], 2_000_001_000);
    forbidden(
        s.post(
            "/api/v1/namespaces/default/pods",
            pod("nope", Some("missing")),
        )
        .await,
        "pods \"nope\" is forbidden: no PriorityClass with name missing was found",
    );
}

#[tokio::test]
async fn pods_naming_no_pull_secrets_get_their_accounts() {
    let s = TestServer::new().await;
    s.created(
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "registry"}]}),
    )
    .await;
    let pod = |name: &str, own: Option<&str>| {
        let mut spec = json!({"serviceAccountName": "puller",
            "containers": [{"name": "c", "image": "i"}]});
        if let Some(own) = own {
            spec["imagePullSecrets"] = json!([{"name": own}]);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    let inherited = s
        .created("/api/v1/namespaces/default/pods", pod("inherits", None))
        .await;
    assert_eq!(
        inherited["spec"]["imagePullSecrets"],
        json!([{"name": "registry"}])
    );
    let own = s
        .created("/api/v1/namespaces/default/pods", pod("own", Some("mine")))
        .await;
    assert_eq!(own["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));
}

#[tokio::test]
async fn pod_specs_are_mostly_immutable() {
    let s = TestServer::new().await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "one"}],
        "tolerations": [{"key": "a", "operator": "Exists"}]}});
    let (_, created) = s.post("/api/v1/namespaces/default/pods", pod).await;
    let path = "/api/v1/namespaces/default/pods/p";
    let mut image = created.clone();
    image["spec"]["containers"][0]["image"] = json!("two");
    image["spec"]["tolerations"] =
        json!([{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]);
    let updated = s.put_ok(path, image).await;
    let mut restart = updated.clone();
    restart["spec"]["restartPolicy"] = json!("Never");
    s.put(path, restart).await.expect_mentions(
        422,
        "Invalid",
        &["spec: Forbidden: pod updates may not change fields"],
    );
    let mut fewer = updated.clone();
    fewer["spec"]["tolerations"] = json!([]);
    s.put(path, fewer).await.expect_failure(422, "Invalid");
    s.merge_patch_ok(path, json!({"metadata": {"labels": {"ok": "yes"}}}))
        .await;
}

#[tokio::test]
async fn the_kubernetes_service_points_at_the_advertised_address() {
    let config = skiff_apiserver::ApiServerConfig {
        advertise_address: Some("192.0.2.10:6443".parse().unwrap()),
        ..Default::default()
    };
    let s = TestServer::with_config(config).await;
    let svc = s
        .get_ok("/api/v1/namespaces/default/services/kubernetes")
        .await;
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.1");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    let (_, ep) = s
        .get("/api/v1/namespaces/default/endpoints/kubernetes")
        .await;
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "192.0.2.10");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], 6443);
    let (_, slice) = s
        .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
        .await;
    assert_eq!(slice["endpoints"][0]["addresses"][0], "192.0.2.10");
}

#[tokio::test]
async fn services_changed_to_node_port_get_node_ports() {
    let s = TestServer::new().await;
    let svc = json!({"metadata": {"name": "later"}, "spec": {"ports": [{"port": 80}]}});
    let (_, created) = s.post("/api/v1/namespaces/default/services", svc).await;
    assert!(created["spec"]["ports"][0].get("nodePort").is_none());
    let body = s
        .merge_patch_ok(
            "/api/v1/namespaces/default/services/later",
            json!({"spec": {"type": "NodePort"}}),
        )
        .await;
    assert!(body["spec"]["ports"][0]["nodePort"].is_u64(), "{body}");
    assert_eq!(body["spec"]["clusterIP"], created["spec"]["clusterIP"]);
}

/// A write answers with the object as it was stored: byte for byte what a
/// GET returns next (the server may answer from the watch cache's copy of
/// that very write), for a create, a replace and a patch alike.
#[tokio::test]
async fn a_writes_answer_is_the_stored_object_byte_for_byte() {
    let s = TestServer::new().await;
    let path = format!("{CMS}/answer");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "answer", "labels": {"b": "2", "a": "1"}},
        "data": {"z": "1", "y": "2"}});
    let (code, created) = s.bytes(Method::POST, CMS, Some(cm)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let (_, got) = s.bytes(Method::GET, &path, None).await;
    assert_eq!(created, got);

    let mut changed: serde_json::Value = serde_json::from_str(&got).unwrap();
    changed["data"]["z"] = json!("3");
    let (code, replaced) = s.bytes(Method::PUT, &path, Some(changed)).await;
    assert_eq!(code, StatusCode::OK, "{replaced}");
    let (_, got) = s.bytes(Method::GET, &path, None).await;
    assert_eq!(replaced, got);
    assert!(got.contains(r#""z":"3""#), "{got}");

    let patched = s.merge_patch_ok(&path, json!({"data": {"x": "4"}})).await;
    let (_, got) = s.bytes(Method::GET, &path, None).await;
    assert_eq!(
        patched,
        serde_json::from_str::<serde_json::Value>(&got).unwrap()
    );
    assert_eq!(patched["data"]["x"], "4");
}
