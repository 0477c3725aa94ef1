//! Where k3s's node password lives: the API server records a hash of a
//! joining node's password in a kube-system Secret named after the node,
//! and the controller manager deletes that Secret when the Node is deleted
//! (so a re-provisioned host can join under the name again). Both sides
//! must agree on the name and type, so they are kept here.

/// The namespace of the password Secrets.
pub const NAMESPACE: &str = "kube-system";
/// The type of the Secrets holding password hashes.
pub const SECRET_TYPE: &str = "skiff.io/node-password";

/// The Secret that keeps `node`'s password hash.
pub fn secret_name(node: &str) -> String {
    format!("{node}.node-password.skiff")
}
