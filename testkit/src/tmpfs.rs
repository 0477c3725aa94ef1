//! A small disk of its own for the tests that fill one (the API server's
//! and the CLI's full-disk tests): a tmpfs of a chosen size, which needs
//! root, as those suites run.

use std::path::Path;
use std::process::Command;

/// A tmpfs of a given size mounted on a temporary directory, unmounted
/// when dropped, also when the test fails (declare it before whatever
/// writes to it, so that is stopped first).
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB; the test stops if it cannot.
    pub fn mount(mib: u64) -> Self {
        let dir = tempfile::tempdir().expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a tmpfs (the tests run as root)");
        Self { dir }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a process still holding a file must not keep the mount.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
