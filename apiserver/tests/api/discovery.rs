use http::StatusCode;
use serde_json::Value;

use crate::harness::{Client, TestServer, find_by, strings};

fn resource<'a>(list: &'a Value, name: &str) -> &'a Value {
    find_by(&list["resources"], "name", name)
}

#[tokio::test]
async fn version_and_health() {
    let s = TestServer::new().await;
    let v = s.get_ok("/version").await;
    assert_eq!(v["major"], "1");
    assert_eq!(v["minor"], "33");
    assert!(v["gitVersion"].as_str().unwrap().starts_with("v1.33."));
    // The platform the server runs on, named as the node label names it.
    assert_eq!(
        v["platform"],
        format!(
            "{}/{}",
            std::env::consts::OS,
            skiff_common::platform::go_arch()
        )
    );
    assert_eq!(
        (&v["emulationMajor"], &v["emulationMinor"]),
        (&Value::from("1"), &Value::from("33"))
    );
    assert_eq!(v["minCompatibilityMinor"], "32");
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, body) = s.get(path).await;
        assert_eq!(code, StatusCode::OK, "{path}");
        assert_eq!(body, Value::String("ok".into()));
    }
}

#[tokio::test]
async fn health_checks_are_listed_excluded_and_asked_one_at_a_time() {
    let s = TestServer::new().await;
    let text = |(code, body): (StatusCode, Value)| {
        assert_eq!(code, StatusCode::OK, "{body}");
        body.as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(
        text(s.get("/readyz?verbose").await),
        "[+]ping ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]shutdown ok\nreadyz check passed\n"
    );
    assert_eq!(
        text(s.get("/livez?verbose").await),
        "[+]ping ok\nlivez check passed\n"
    );
    assert_eq!(
        text(s.get("/readyz?verbose&exclude=etcd&exclude=nosuch").await),
        "[+]ping ok\n[+]etcd excluded: ok\n[+]etcd-readiness ok\n[+]shutdown ok\n\
         warn: some health checks cannot be excluded: no matches for \"nosuch\"\n\
         readyz check passed\n"
    );
    for path in [
        "/healthz/etcd",
        "/livez/ping",
        "/readyz/shutdown",
        "/readyz/etcd-readiness",
    ] {
        assert_eq!(text(s.get(path).await), "ok", "{path}");
    }
    // Liveness has no store check, and unknown checks are not found.
    for path in ["/livez/etcd", "/readyz/store", "/readyz/nosuch"] {
        assert_eq!(s.get(path).await.0, StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn legacy_discovery_documents() {
    let s = TestServer::new().await;
    let (_, api) = s.get("/api").await;
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], serde_json::json!(["v1"]));

    let (_, core) = s.get("/api/v1").await;
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["groupVersion"], "v1");
    let pods = resource(&core, "pods");
    assert_eq!(pods["kind"], "Pod");
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["shortNames"], serde_json::json!(["po"]));
    assert_eq!(pods["categories"], serde_json::json!(["all"]));
    assert_eq!(
        resource(&core, "pods/binding")["verbs"],
        serde_json::json!(["create"])
    );
    // A subresource names its group and version only where they are not
    // its parent's, as upstream's document has it.
    let binding = resource(&core, "pods/binding");
    assert_eq!(binding["kind"], "Binding");
    assert!(binding.get("version").is_none() && binding.get("group").is_none());
    assert!(resource(&core, "pods/exec").get("version").is_none());
    let eviction = resource(&core, "pods/eviction");
    assert_eq!(
        (&eviction["group"], &eviction["version"]),
        (&serde_json::json!("policy"), &serde_json::json!("v1"))
    );
    assert_eq!(resource(&core, "namespaces")["namespaced"], false);

    let (_, groups) = s.get("/apis").await;
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = strings(&groups["groups"], "name");
    for g in [
        "apps",
        "batch",
        "autoscaling",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
    ] {
        assert!(names.contains(&g), "{g}");
    }
    let (_, autoscaling) = s.get("/apis/autoscaling").await;
    assert_eq!(autoscaling["kind"], "APIGroup");
    assert_eq!(
        autoscaling["preferredVersion"]["groupVersion"],
        "autoscaling/v2"
    );

    let (_, apps) = s.get("/apis/apps/v1").await;
    let scale = resource(&apps, "deployments/scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["group"], "autoscaling");
    assert_eq!(
        resource(&apps, "deployments")["shortNames"],
        serde_json::json!(["deploy"])
    );
    s.get_not_found("/apis/apps/v2").await;
}

/// Aggregated discovery: what kubectl asks for first.
mod aggregated {
    use http::StatusCode;
    use serde_json::Value;

    use super::super::harness::{TestServer, fetch, find_by, find_in};

    const ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

    #[tokio::test]
    async fn apis_and_api_serve_group_discovery_lists() {
        let ts = TestServer::new().await;
        let (status, headers, body) = fetch(&ts, "/apis", &[("accept", ACCEPT)]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["kind"], "APIGroupDiscoveryList");
        assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
        let apps = find_in(
            &doc["items"],
            |g| g["metadata"]["name"] == "apps",
            "apps group",
        );
        let v1 = &apps["versions"][0];
        assert_eq!(v1["version"], "v1");
        assert_eq!(v1["freshness"], "Current");
        let deployments = find_in(
            &v1["resources"],
            |r| r["resource"] == "deployments",
            "deployments",
        );
        assert_eq!(deployments["scope"], "Namespaced");
        assert_eq!(deployments["shortNames"][0], "deploy");
        assert_eq!(deployments["responseKind"]["kind"], "Deployment");
        let scale = find_in(
            &deployments["subresources"],
            |s| s["subresource"] == "scale",
            "scale",
        );
        assert_eq!(scale["responseKind"]["group"], "autoscaling");
        // autoscaling lists its preferred version first.
        let autoscaling = find_in(
            &doc["items"],
            |g| g["metadata"]["name"] == "autoscaling",
            "autoscaling group",
        );
        assert_eq!(autoscaling["versions"][0]["version"], "v2");

        let (status, headers, body) = fetch(
            &ts,
            "/api",
            &[(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            )],
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        );
        let doc: Value = serde_json::from_slice(&body).unwrap();
        let core = &doc["items"][0];
        assert!(core["metadata"].get("name").is_none());
        let pods = find_by(&core["versions"][0]["resources"], "resource", "pods");
        assert_eq!(pods["singularResource"], "pod");

        // Legacy discovery is still what plain JSON gets.
        let (_, headers, body) = fetch(&ts, "/apis", &[("accept", "application/json")]).await;
        assert_eq!(headers["content-type"], "application/json");
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["kind"], "APIGroupList");
    }
}

#[tokio::test]
async fn componentstatuses_report_the_store_and_the_registered_components() {
    use skiff_apiserver::component_status::ComponentHealth;
    let health = ComponentHealth::default();
    let _scheduler = health.running("scheduler");
    // A component whose task ended is reported, as unhealthy.
    drop(health.running("controller-manager"));
    let s = TestServer::configured(|c| c.component_health = health).await;
    let list = s.get_ok("/api/v1/componentstatuses").await;
    assert_eq!(list["kind"], "ComponentStatusList");
    let conditions: Vec<(String, Value)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_string(),
                c["conditions"][0].clone(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            (
                "controller-manager".to_string(),
                serde_json::json!({"type": "Healthy", "status": "False",
                                   "error": "the controller-manager is not running"})
            ),
            (
                "scheduler".to_string(),
                serde_json::json!({"type": "Healthy", "status": "True", "message": "ok"})
            ),
            (
                "etcd-0".to_string(),
                serde_json::json!({"type": "Healthy", "status": "True", "message": "ok"})
            ),
        ]
    );
    let one = s.get_ok("/api/v1/componentstatuses/scheduler").await;
    assert_eq!(one["kind"], "ComponentStatus");
    let table = s.get_table("/api/v1/componentstatuses").await;
    let cells: Vec<Value> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].clone())
        .collect();
    assert_eq!(
        cells[0],
        serde_json::json!([
            "controller-manager",
            "Unhealthy",
            "",
            "the controller-manager is not running"
        ])
    );
    // Read-only, and only what exists.
    let (code, _) = s.get("/api/v1/componentstatuses/nosuch").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = s
        .post(
            "/api/v1/componentstatuses",
            serde_json::json!({"metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
}
