//! Upstream's defaulting as a client sees it: what a created or updated
//! object looks like in the response and when read back, for inputs that
//! leave the defaulted fields out.

use serde_json::{Value, json};

use crate::harness::{Client, TestServer};

/// Creates `body` at `path`, then reads it back from `path/name`; returns
/// (created response, stored object).
async fn create_and_read(s: &TestServer, path: &str, body: Value) -> (Value, Value) {
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    let created = s.created(path, body).await;
    let stored = s.get_ok(&format!("{path}/{name}")).await;
    (created, stored)
}

#[tokio::test]
async fn a_secrets_string_data_is_merged_into_data_and_dropped() {
    let s = TestServer::new().await;
    let path = "/api/v1/namespaces/default/secrets";
    let secret = json!({"metadata": {"name": "creds"},
        "data": {"user": "YWRtaW4=", "pass": "b2xk"},
        "stringData": {"pass": "s3cret", "host": "db"}});
    let (created, stored) = create_and_read(&s, path, secret).await;
    for object in [&created, &stored] {
        assert!(object.get("stringData").is_none(), "{object}");
        // stringData wins over data for a key both name.
        assert_eq!(
            object["data"],
            json!({"user": "YWRtaW4=", "pass": "czNjcmV0", "host": "ZGI="}),
            "{object}"
        );
        assert_eq!(object["type"], "Opaque");
    }

    // A replace carrying only stringData keeps nothing but what it names.
    let mut update = stored.clone();
    update.as_object_mut().unwrap().remove("data");
    update["stringData"] = json!({"token": "abc"});
    let replaced = s.put_ok(&format!("{path}/creds"), update).await;
    assert!(replaced.get("stringData").is_none(), "{replaced}");
    assert_eq!(replaced["data"], json!({"token": "YWJj"}));

    // A merge patch adding stringData lands in data beside the stored keys.
    let patched = s
        .merge_patch_ok(
            &format!("{path}/creds"),
            json!({"stringData": {"extra": "x"}}),
        )
        .await;
    assert!(patched.get("stringData").is_none(), "{patched}");
    assert_eq!(patched["data"], json!({"token": "YWJj", "extra": "eA=="}));
    let (_, stored) = s.get(&format!("{path}/creds")).await;
    assert_eq!(stored["data"], patched["data"]);
    assert!(stored.get("stringData").is_none(), "{stored}");
}

#[tokio::test]
async fn a_replication_controller_takes_selector_and_labels_from_its_template() {
    let s = TestServer::new().await;
    let path = "/api/v1/namespaces/default/replicationcontrollers";
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let rc = json!({"metadata": {"name": "bare"}, "spec": {"template": template}});
    let (created, stored) = create_and_read(&s, path, rc).await;
    for object in [&created, &stored] {
        assert_eq!(
            object["spec"]["selector"],
            json!({"app": "web"}),
            "{object}"
        );
        assert_eq!(
            object["metadata"]["labels"],
            json!({"app": "web"}),
            "{object}"
        );
        assert_eq!(object["spec"]["replicas"], 1);
    }

    // What the client set is kept.
    let rc = json!({"metadata": {"name": "own", "labels": {"team": "a"}},
        "spec": {"selector": {"app": "web"}, "template": template}});
    let (created, _) = create_and_read(&s, path, rc).await;
    assert_eq!(created["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(created["spec"]["selector"], json!({"app": "web"}));
}

#[tokio::test]
async fn pod_specs_get_empty_dir_volumes_and_field_ref_versions_in_pods_and_templates() {
    let s = TestServer::new().await;
    let pod_spec = json!({
        "containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80}],
            "env": [{"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "PLAIN", "value": "x"}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]}],
        "volumes": [{"name": "scratch"},
            {"name": "cfg", "configMap": {"name": "settings"}},
            {"name": "info", "downwardAPI": {"items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]});
    let check = |spec: &Value| {
        assert_eq!(
            spec["volumes"][0],
            json!({"name": "scratch", "emptyDir": {}}),
            "{spec}"
        );
        assert_eq!(
            spec["volumes"][1]["configMap"]["defaultMode"], 420,
            "{spec}"
        );
        assert_eq!(
            spec["volumes"][2]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1",
            "{spec}"
        );
        let container = &spec["containers"][0];
        assert_eq!(
            container["env"][0]["valueFrom"]["fieldRef"],
            json!({"apiVersion": "v1", "fieldPath": "metadata.name"}),
            "{spec}"
        );
        assert_eq!(container["env"][1], json!({"name": "PLAIN", "value": "x"}));
        assert_eq!(container["ports"][0]["protocol"], "TCP");
    };

    let pod = json!({"metadata": {"name": "p"}, "spec": pod_spec});
    let (created, stored) = create_and_read(&s, "/api/v1/namespaces/default/pods", pod).await;
    check(&created["spec"]);
    check(&stored["spec"]);

    let deployment = json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod_spec}}});
    let (created, stored) = create_and_read(
        &s,
        "/apis/apps/v1/namespaces/default/deployments",
        deployment,
    )
    .await;
    check(&created["spec"]["template"]["spec"]);
    check(&stored["spec"]["template"]["spec"]);
}

#[tokio::test]
async fn a_created_service_has_an_empty_load_balancer_status() {
    let s = TestServer::new().await;
    let svc = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
    let (created, stored) = create_and_read(&s, "/api/v1/namespaces/default/services", svc).await;
    assert_eq!(created["status"], json!({"loadBalancer": {}}), "{created}");
    assert_eq!(stored["status"], json!({"loadBalancer": {}}), "{stored}");
}

#[tokio::test]
async fn endpoint_slice_ports_get_an_empty_name_and_tcp() {
    let s = TestServer::new().await;
    let slice = json!({"metadata": {"name": "web-1"}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.42.0.5"]}],
        "ports": [{"port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]});
    let (created, stored) = create_and_read(
        &s,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        slice,
    )
    .await;
    for object in [&created, &stored] {
        assert_eq!(
            object["ports"],
            json!([{"name": "", "port": 80, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]),
            "{object}"
        );
    }
}

/// DefaultStorageClass admission: a new claim that names no class gets the
/// default one (the newest marked, by either annotation; the first by name
/// among equally new ones). A claim asking for `""`, one naming a class or
/// the legacy annotation, and updates are left as they are.
#[tokio::test]
async fn a_claim_naming_no_class_gets_the_default_storage_class() {
    let s = TestServer::new().await;
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let classes = "/apis/storage.k8s.io/v1/storageclasses";
    let claim = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["accessModes"] = json!(["ReadWriteOnce"]);
        spec["resources"] = json!({"requests": {"storage": "1Gi"}});
        json!({"metadata": {"name": name}, "spec": spec})
    };
    // Before any class is marked default, a claim keeps naming none.
    let early = s.created(claims, claim("early", json!({}))).await;
    assert!(early["spec"].get("storageClassName").is_none(), "{early}");

    let class = |name: &str, marker: Option<&str>| {
        let mut class = json!({"metadata": {"name": name}, "provisioner": "example.com/p"});
        if let Some(marker) = marker {
            class["metadata"]["annotations"] = json!({marker: "true"});
        }
        class
    };
    s.created(classes, class("plain", None)).await;
    s.created(
        classes,
        class(
            "b-default",
            Some("storageclass.kubernetes.io/is-default-class"),
        ),
    )
    .await;
    // Newer than b-default, or as new and first by name: it wins either way.
    s.created(
        classes,
        class(
            "a-default",
            Some("storageclass.beta.kubernetes.io/is-default-class"),
        ),
    )
    .await;

    let cases = [
        ("none", json!({}), json!("a-default")),
        ("empty", json!({"storageClassName": ""}), json!("")),
        (
            "named",
            json!({"storageClassName": "plain"}),
            json!("plain"),
        ),
    ];
    for (name, spec, want) in cases {
        let (created, stored) = create_and_read(&s, claims, claim(name, spec)).await;
        for object in [&created, &stored] {
            assert_eq!(object["spec"]["storageClassName"], want, "{name}: {object}");
        }
    }
    let mut legacy = claim("legacy", json!({}));
    legacy["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "plain"});
    let legacy = s.created(claims, legacy).await;
    assert!(legacy["spec"].get("storageClassName").is_none(), "{legacy}");

    // An update is not a create: the early claim still names no class.
    let updated = s
        .merge_patch_ok(
            &format!("{claims}/early"),
            json!({"metadata": {"labels": {"touched": "yes"}}}),
        )
        .await;
    assert!(
        updated["spec"].get("storageClassName").is_none(),
        "{updated}"
    );
}
