//! Overload (issue #15): 32 concurrent writers, as a service account
//! fenced into a priority level of one seat and one queue slot, against a
//! server with two seats for mutations and two for the rest get 429
//! TooManyRequests from priority and fairness, while
//! kubectl as the admin (exempt) and the controllers (their own
//! workload-high level) keep working: a Deployment created mid-flood gets
//! all its pods.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client, Config};

use super::support::{
    Kubectl, Server, apply, assert_contains, bind_account, eventually, service_account,
};

const WRITERS: usize = 32;
/// Big enough that a write takes a while, so the two seats stay busy.
const PAYLOAD: usize = 64 * 1024;

async fn client_from(path: &std::path::Path) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    // kube-rs retries 429s after their Retry-After by default; the test
    // counts them instead.
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// Stops the writers when the test ends, failed or not: the runtime's
/// drop waits for its workers, and a writer that never yields would hold
/// one forever.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Counts {
    created: AtomicUsize,
    refused: AtomicUsize,
    other: AtomicUsize,
}

#[test]
fn a_write_flood_gets_429_while_the_admin_and_controllers_keep_working() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = Server::start_with(&[
        "--disable-agent",
        "--max-requests-inflight",
        "2",
        "--max-mutating-requests-inflight",
        "2",
        // A request may wait a quarter of this (500 ms) in its queue.
        "--request-timeout",
        "2s",
    ]);
    server.kubectl_ok(&["create", "namespace", "flood"]);
    let writer = service_account(&server, "flood", "writer");
    bind_account(&server, "writer", "--clusterrole=edit", "flood", "writer");
    // The writer's requests go to a level of one seat and one queue slot,
    // as an administrator would fence a noisy client; the rest of the
    // configuration is upstream's bootstrap set.
    let fence = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: flood}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Queue
      queuing: {queues: 1, handSize: 1, queueLengthLimit: 1}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: flood}
spec:
  priorityLevelConfiguration: {name: flood}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount: {name: writer, namespace: flood}
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
"#;
    apply(&server, fence);
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_writers = StopOnDrop(stop.clone());
    let flood = runtime.block_on(async {
        let client = client_from(&writer).await;
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), "flood");
            let (counts, stop) = (counts.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let data = "x".repeat(PAYLOAD);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let cm = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(format!("w{w}-{i}")),
                            ..Default::default()
                        },
                        data: Some([("blob".to_string(), data.clone())].into()),
                        ..Default::default()
                    };
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => counts.created.fetch_add(1, Ordering::Relaxed),
                        Err(kube::Error::Api(status)) if status.code == 429 => {
                            assert_eq!(status.reason, "TooManyRequests");
                            assert_eq!(
                                status.message,
                                "Too many requests, please try again later."
                            );
                            counts.refused.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(_) => {
                            // A refused connection fails without ever
                            // yielding; let the runtime run.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            counts.other.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }));
        }
        tasks
    });
    // Keep the flood going on the runtime's threads while kubectl works.
    let _guard = runtime.enter();
    let flooding = std::time::Instant::now();
    while counts.refused.load(Ordering::Relaxed) == 0 {
        assert!(
            flooding.elapsed() < Duration::from_secs(20),
            "no 429 in 20 s: created {}, other errors {}",
            counts.created.load(Ordering::Relaxed),
            counts.other.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The admin is exempt: kubectl answers during the flood (kubectl_ok
    // fails the test on any refusal or client-side timeout).
    server.kubectl_ok(&[
        "get",
        "configmaps",
        "-n",
        "flood",
        "-o",
        "name",
        "--chunk-size=50",
        "--request-timeout=20s",
    ]);
    server.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=3",
        "--request-timeout=20s",
    ]);
    // The controllers are not starved: the Deployment gets its pods.
    eventually(Duration::from_secs(30), "the deployment's 3 pods", || {
        let pods = server.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "name"]);
        (pods.lines().count() == 3).then_some(())
    });
    // A flood refused at the door, not a flood refused in full.
    let refused = counts.refused.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for task in flood {
            task.await.expect("writer");
        }
    });
    let created = counts.created.load(Ordering::Relaxed);
    assert!(
        refused > 0 && created > 0,
        "created {created}, refused {refused}"
    );

    // Every answer names the schema and level that decided it (kubectl
    // prints response headers at -v=8).
    let out = Kubectl::new(&writer).run(&[
        "get",
        "--raw",
        "/api/v1/namespaces/flood/configmaps?limit=1",
        "-v=8",
    ]);
    let log = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert_contains(&log, "x-kubernetes-pf-flowschema-uid");
    assert_contains(&log, "x-kubernetes-pf-prioritylevel-uid");
}
