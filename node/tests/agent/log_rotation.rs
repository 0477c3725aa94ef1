//! Container log rotation on real containerd: a container that writes fast
//! keeps at most the configured number of log files, older rotated ones
//! gzip-compressed and still readable, and a follower of its log goes on
//! across rotations.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use skiff_node::agent::pod::log_rotation::LogRotation;
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::TestCluster;
use crate::streaming::{get, node_server};

const LONG: Duration = Duration::from_secs(60);
const MAX_SIZE: u64 = 16 << 10;
const MAX_FILES: usize = 4;

/// The files of the container's log: `0.log` and its rotated ones.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("0.log"))
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chatty_container_keeps_its_logs_rotated_compressed_and_followable() {
    let cluster = TestCluster::start_with(17, |config| {
        config.log_rotation = LogRotation {
            max_size: MAX_SIZE,
            max_files: MAX_FILES,
            interval: Duration::from_millis(300),
        };
    })
    .await;
    // About 90 KB a second: 1..2000, ten times a second.
    cluster
        .create_pod(json!({
            "metadata": {"name": "chatty"},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "c", "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c", "while true; do seq 1 2000; sleep 0.1; done"]}]}
        }))
        .await;
    let running = cluster.wait_phase("chatty", LONG, "Running").await;
    let uid = running.metadata.uid.as_deref().expect("uid");
    let dir = cluster
        .config
        .log_root()
        .join(format!("default_chatty_{uid}"))
        .join("c");

    // Rotated often enough to have dropped the oldest and compressed some;
    // a compressed file reads back (it may be removed as the next one is
    // rotated: then the next listing finds another).
    let text = skiff_testkit::eventually(LONG, "a compressed rotated log", || async {
        let gz = log_files(&dir)
            .into_iter()
            .find(|f| f.extension().is_some_and(|e| e == "gz"))?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(gz).ok()?)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    })
    .await;
    for _ in 0..10 {
        let files = log_files(&dir);
        assert!(files.len() <= MAX_FILES, "{files:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // It holds whole CRI log lines of the container.
    let first = text.lines().next().expect("a line");
    let fields: Vec<&str> = first.splitn(4, ' ').collect();
    assert_eq!(fields[1..3], ["stdout", "F"], "{first}");
    assert!(fields[3].parse::<u32>().is_ok(), "{first}");

    // A follower goes on across rotations: 200 KB is several files' worth.
    let node = node_server(&cluster).await;
    let (code, body) = get(
        &node,
        "/containerLogs/default/chatty/c?follow=true&limitBytes=200000",
        true,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body.len(), 200_000);
    // Only the container's lines (the last one may be cut at the limit).
    let lines: Vec<&str> = body.lines().collect();
    let whole = &lines[..lines.len() - 1];
    assert!(
        whole.iter().all(|l| l.parse::<u32>().is_ok()),
        "{:?}",
        whole.iter().find(|l| l.parse::<u32>().is_err())
    );
    cluster.teardown().await;
}
