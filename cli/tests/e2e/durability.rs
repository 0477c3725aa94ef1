//! A crash loses no acknowledged write: SIGKILL the server while clients are
//! creating objects, restart it, and find every object whose create succeeded.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Config};

use super::support::Server;

/// Names whose create returned 201, shared by the writer tasks.
type Acked = std::sync::Mutex<Vec<String>>;

pub async fn client_for(server: &Server) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig()).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

#[test]
fn sigkill_during_concurrent_creates_loses_no_acknowledged_object() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut server = Server::start();
    let acked: Arc<Acked> = Arc::default();
    runtime.block_on(async {
        let client = client_for(&server).await;
        let mut writers = Vec::new();
        for writer in 0..8 {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            let acked = acked.clone();
            writers.push(tokio::spawn(async move {
                for i in 0.. {
                    let name = format!("w{writer}-{i}");
                    let cm = ConfigMap {
                        metadata: kube::api::ObjectMeta {
                            name: Some(name.clone()),
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    match api.create(&PostParams::default(), &cm).await {
                        Ok(_) => acked.lock().expect("lock").push(name),
                        Err(_) => break,
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        server.kill();
        for w in writers {
            let _ = w.await;
        }
    });
    let acked = acked.lock().expect("lock").clone();
    assert!(
        acked.len() > 50,
        "writers made progress before the kill: {}",
        acked.len()
    );

    server.restart();
    runtime.block_on(async {
        let client = client_for(&server).await;
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let present: BTreeSet<String> = api
            .list(&ListParams::default())
            .await
            .expect("list after restart")
            .items
            .into_iter()
            .filter_map(|cm| cm.metadata.name)
            .collect();
        let lost: Vec<_> = acked.iter().filter(|n| !present.contains(*n)).collect();
        assert!(
            lost.is_empty(),
            "acknowledged creates lost after SIGKILL: {lost:?}"
        );
    });
}
