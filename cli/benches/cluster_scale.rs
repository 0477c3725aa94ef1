//! Controller manager and scheduler at scale on simulated nodes: a real
//! `skiff server --simulated-nodes 100`, one Deployment scaled 0 → 1,000
//! replicas, then rolled to a new template.
//!
//! Run: `cargo bench -p skiff --bench cluster_scale`
//! (`SCALE_NODES` and `SCALE_REPLICAS` change the sizes).

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};

#[path = "support/mod.rs"]
mod support;

use support::{
    admin_client, env_or, free_port, server_command, status_mib, terminate, wait_rolled_out,
};

/// Peak and current resident memory of a process, in MiB.
fn memory_mib(pid: u32) -> (f64, f64) {
    (status_mib(pid, "VmHWM:"), status_mib(pid, "VmRSS:"))
}

async fn current_revision(api: &Api<Deployment>) -> u64 {
    api.list(&ListParams::default().limit(1))
        .await
        .ok()
        .and_then(|l| l.metadata.resource_version)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes = env_or("SCALE_NODES", 100);
    let replicas = env_or("SCALE_REPLICAS", 1000) as i32;
    let dir = tempfile::tempdir()?;
    let port = free_port();
    let log = dir.path().join("server.log");
    let mut server = server_command(support::skiff_binary(), dir.path(), port, &log)?
        .args(["--simulated-nodes", &nodes.to_string()])
        .spawn()?;
    let pid = server.id();
    let client = admin_client(dir.path(), true).await?;
    let node_api: Api<Node> = Api::all(client.clone());
    loop {
        let ready = node_api
            .list(&ListParams::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if ready >= nodes {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, idle_rss) = memory_mib(pid);

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let manifest: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "scale"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "scale"}},
                 "template": {"metadata": {"labels": {"app": "scale"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1",
                                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    }))?;
    deployments
        .create(&PostParams::default(), &manifest)
        .await?;
    wait_rolled_out(&deployments, "scale", 0, Instant::now()).await;

    let rev_before = current_revision(&deployments).await;
    let started = Instant::now();
    deployments
        .patch(
            "scale",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    let scale_up = wait_rolled_out(&deployments, "scale", replicas, started).await;
    let rev_after = current_revision(&deployments).await;
    let (peak_after_scale, _) = memory_mib(pid);

    let started = Instant::now();
    deployments
        .patch(
            "scale",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        )
        .await?;
    let rollout = wait_rolled_out(&deployments, "scale", replicas, started).await;
    let rev_rolled = current_revision(&deployments).await;
    let (peak, rss) = memory_mib(pid);

    let writes_up = rev_after.saturating_sub(rev_before) as f64 / scale_up.as_secs_f64();
    let writes_roll = rev_rolled.saturating_sub(rev_after) as f64 / rollout.as_secs_f64();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| simulated nodes | {nodes} |");
    println!(
        "| scale 0 → {replicas}: seconds until availableReplicas = {replicas} | {:.1} |",
        scale_up.as_secs_f64()
    );
    println!("| scale-up: API writes committed per second | {writes_up:.0} |");
    println!(
        "| rolling update of {replicas} replicas: seconds until rolled out | {:.1} |",
        rollout.as_secs_f64()
    );
    println!("| rolling update: API writes committed per second | {writes_roll:.0} |");
    println!("| server RSS idle with {nodes} nodes | {idle_rss:.0} MiB |");
    println!("| server peak RSS after scale-up | {peak_after_scale:.0} MiB |");
    println!("| server peak RSS overall / RSS at end | {peak:.0} / {rss:.0} MiB |");

    terminate(&mut server);
    Ok(())
}
