//! Crash safety: a child process (this same test binary, selected by an
//! environment variable) writes continuously and prints every acknowledged
//! write; the parent SIGKILLs it at random moments and checks, after every
//! reopen, that each acknowledged write is there with its revision.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rand::Rng;
use skiff_store::{Store, StoreError};

use super::common::open;

const CHILD_ENV: &str = "SKIFF_STORE_CRASH_CHILD_DIR";
const CYCLE_ENV: &str = "SKIFF_STORE_CRASH_CYCLE";
const TEST_NAME: &str = "crash::sigkill_loses_no_acknowledged_write";
const CYCLES: usize = 50;
const WRITERS: usize = 8;

#[test]
fn sigkill_loses_no_acknowledged_write() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match std::env::var_os(CHILD_ENV) {
        Some(dir) => runtime.block_on(child(dir.into())),
        None => runtime.block_on(parent()),
    }
}

/// Writes until killed: per writer, a create of a fresh key and an update of
/// the writer's own key per step; writer 0 also compacts now and then, and
/// writer 1 defragments (so kills also land inside a generation switch).
async fn child(dir: std::path::PathBuf) {
    let cycle: usize = std::env::var(CYCLE_ENV)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let store = Arc::new(open(&dir));
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let own = format!("u/{w}");
                for i in 0.. {
                    let key = format!("c/{cycle}/{w}/{i}");
                    let kv = store.create(&key, Bytes::from(key.clone())).await.unwrap();
                    println!("ACK C {key} {}", kv.mod_revision);
                    let value = Bytes::from(format!("{cycle}/{i}"));
                    let kv = match store.update(&own, value.clone(), None).await {
                        Err(StoreError::NotFound { .. }) => {
                            store.create(&own, value).await.unwrap()
                        }
                        other => other.unwrap(),
                    };
                    println!("ACK U {own} {}", kv.mod_revision);
                    if w == 0 && i % 10 == 4 {
                        store
                            .compact(store.current_revision().saturating_sub(40))
                            .await
                            .unwrap();
                    }
                    if w == 1 && i % 10 == 9 {
                        store.defragment().await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

struct Ack {
    kind: String,
    key: String,
    revision: u64,
}

fn parse(line: &str) -> Option<Ack> {
    let mut parts = line.strip_prefix("ACK ")?.split(' ');
    Some(Ack {
        kind: parts.next()?.to_owned(),
        key: parts.next()?.to_owned(),
        revision: parts.next()?.parse().ok()?,
    })
}

async fn parent() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut last_acked = 0u64;
    let mut creates: Vec<(String, u64)> = Vec::new();
    let mut updates: HashMap<String, u64> = HashMap::new();
    for cycle in 0..CYCLES {
        let mut child = Command::new(&exe)
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env(CYCLE_ENV, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = rng.random_range(1..400usize);
        let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut acks = Vec::new();
        let mut killed = false;
        while let Ok(line) = lines_rx.recv_timeout(Duration::from_secs(30)) {
            if let Some(ack) = parse(&line) {
                acks.push(ack);
            }
            if !killed && acks.len() >= kill_after {
                child.kill().unwrap(); // SIGKILL
                killed = true;
            }
        }
        if !killed {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        reader.join().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).ok();
        assert!(
            killed,
            "cycle {cycle}: child stopped by itself ({status}): {stderr}"
        );

        if let Some(first) = acks.iter().map(|a| a.revision).min() {
            assert!(
                first > last_acked,
                "cycle {cycle}: revision {first} reused (last acked {last_acked})"
            );
        }
        for ack in &acks {
            match ack.kind.as_str() {
                "C" => creates.push((ack.key.clone(), ack.revision)),
                _ => {
                    let seen = updates.entry(ack.key.clone()).or_default();
                    *seen = (*seen).max(ack.revision);
                }
            }
            last_acked = last_acked.max(ack.revision);
        }
        verify(dir.path(), cycle, last_acked, &creates, &updates).await;
    }
    assert!(
        creates.len() > CYCLES,
        "the children acknowledged too few writes"
    );
}

async fn verify(
    dir: &std::path::Path,
    cycle: usize,
    last_acked: u64,
    creates: &[(String, u64)],
    updates: &HashMap<String, u64>,
) {
    let store = open(dir);
    let generations = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("gen-"))
        .count();
    assert_eq!(
        generations, 1,
        "cycle {cycle}: leftover generations after open"
    );
    let current = store.current_revision();
    assert!(
        current >= last_acked,
        "cycle {cycle}: revision {current} < acknowledged {last_acked}"
    );
    for (key, revision) in creates {
        let kv = store.get(key).await.unwrap();
        assert_eq!(
            kv.map(|kv| kv.mod_revision),
            Some(*revision),
            "cycle {cycle}: acknowledged create of {key}"
        );
    }
    for (key, revision) in updates {
        let kv = store.get(key).await.unwrap().expect("acknowledged key");
        assert!(
            kv.mod_revision >= *revision,
            "cycle {cycle}: {key} went back"
        );
    }
    // The retained history is complete: contiguous revisions up to the current one.
    let from = store.compact_revision().max(current.saturating_sub(300));
    let mut watch = store.watch("", from).unwrap();
    // Revision 1 is the empty store; the first write is revision 2.
    for expected in (from + 1).max(2)..=current {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("history event")
            .expect("stream open")
            .unwrap_or_else(|e| panic!("cycle {cycle}: history read failed: {e}"));
        assert_eq!(event.revision(), expected);
    }
    store.close().await.unwrap();
}
