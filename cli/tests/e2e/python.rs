//! The Python `kubernetes` client (installed by scripts/bootstrap).

use super::support::{Server, python_ok};

#[test]
fn core_v1_crud_and_label_selected_watch() {
    let server = Server::start();
    python_ok(&server.kubeconfig(), "core_v1.py", &[]);
}
