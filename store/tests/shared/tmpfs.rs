//! The scratch directories of both store test suites.

/// A fresh directory; on tmpfs so the many fsyncs of the checks (property
/// tests among them) stay cheap.
pub fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("skiff-store-test")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("temp dir")
}
