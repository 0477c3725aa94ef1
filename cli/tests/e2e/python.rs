//! The Python `kubernetes` client (installed by scripts/bootstrap).

use std::process::Command;

use super::support::Server;

#[test]
fn core_v1_crud_and_label_selected_watch() {
    let server = Server::start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/core_v1.py");
    let out = Command::new("python3")
        .arg(script)
        .env("KUBECONFIG", server.kubeconfig())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
