//! Importing image archives into containerd's `k8s.io` namespace (the one
//! CRI serves), one file at a time or a whole airgap directory at start-up
//! as k3s does with `agent/images/`. The import runs `ctr`, which ships with
//! containerd and speaks its content and image APIs.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::cri::CriRuntime;
use crate::runtime::{Runtime, RuntimeError};

/// The containerd namespace CRI uses.
pub const CRI_NAMESPACE: &str = "k8s.io";

/// File name endings of archives an airgap directory may hold. Only plain
/// tar: `ctr images import` of containerd 1.6 rejects compressed archives
/// ("archive/tar: invalid tar header").
const ARCHIVE_SUFFIXES: &[&str] = &[".tar"];

/// A failed import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// `ctr` could not be run.
    #[error("running {bin}: {source}")]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `ctr` ran and failed.
    #[error("importing {archive}: ctr exited with {status}: {stderr}")]
    Failed {
        /// The archive.
        archive: PathBuf,
        /// ctr's exit status.
        status: std::process::ExitStatus,
        /// What ctr printed on stderr.
        stderr: String,
    },
    /// `ctr` did not finish in time.
    #[error("importing {archive}: no result within {after:?}")]
    Timeout {
        /// The archive.
        archive: PathBuf,
        /// The limit.
        after: Duration,
    },
    /// containerd imported the images but CRI did not list them in time.
    #[error("imported {names:?} but CRI did not see them within {after:?}")]
    NotVisible {
        /// The image names still missing.
        names: Vec<String>,
        /// How long we waited.
        after: Duration,
    },
    /// Asking CRI for the imported images failed.
    #[error("checking imported images through CRI: {0}")]
    Cri(#[from] RuntimeError),
    /// The airgap directory could not be read.
    #[error("reading image directory {dir}: {source}")]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Imports archives into one containerd.
#[derive(Debug, Clone)]
pub struct ImageImporter {
    ctr_bin: PathBuf,
    socket: PathBuf,
    timeout: Duration,
    visible_via: Option<CriRuntime>,
}

/// Outcome of importing an airgap directory: one bad archive does not stop
/// the others.
#[derive(Debug, Default)]
pub struct AirgapReport {
    /// Archives imported, with the image names each one held.
    pub imported: Vec<(PathBuf, Vec<String>)>,
    /// Archives that failed.
    pub failed: Vec<(PathBuf, ImportError)>,
}

impl ImageImporter {
    /// An importer for the containerd listening on `socket`, using `ctr`
    /// from `PATH` and a 5-minute limit per archive.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            ctr_bin: PathBuf::from("ctr"),
            socket: socket.into(),
            timeout: Duration::from_secs(300),
            visible_via: None,
        }
    }

    /// After each import, waits until `cri` reports the imported images.
    /// containerd's CRI plugin learns about images imported through its
    /// image API from an asynchronous event, so a pod created right after
    /// `ctr` returns could otherwise miss its image (or the pause image).
    pub fn wait_visible_through(mut self, cri: CriRuntime) -> Self {
        self.visible_via = Some(cri);
        self
    }

    /// Uses another `ctr` binary.
    pub fn with_ctr(mut self, ctr_bin: impl Into<PathBuf>) -> Self {
        self.ctr_bin = ctr_bin.into();
        self
    }

    /// Changes the per-archive time limit.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Imports one archive (docker-archive or OCI layout tar) and unpacks it
    /// for CRI's snapshotter; returns the image names it held.
    pub async fn import(&self, archive: &Path) -> Result<Vec<String>, ImportError> {
        let mut command = Command::new(&self.ctr_bin);
        command
            .arg("--address")
            .arg(&self.socket)
            .arg("--namespace")
            .arg(CRI_NAMESPACE)
            .args(["images", "import"])
            .arg(archive)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command.spawn().map_err(|source| ImportError::Spawn {
            bin: self.ctr_bin.clone(),
            source,
        })?;
        let output = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| ImportError::Timeout {
                archive: archive.to_path_buf(),
                after: self.timeout,
            })?
            .map_err(|source| ImportError::Spawn {
                bin: self.ctr_bin.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(ImportError::Failed {
                archive: archive.to_path_buf(),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        let names = imported_names(&String::from_utf8_lossy(&output.stdout));
        if let Some(cri) = &self.visible_via {
            wait_visible(cri, &names, self.timeout).await?;
        }
        Ok(names)
    }

    /// Imports every archive in `dir` in name order. A missing directory
    /// holds no images; an unreadable one is an error.
    pub async fn import_dir(&self, dir: &Path) -> Result<AirgapReport, ImportError> {
        let mut report = AirgapReport::default();
        for archive in airgap_archives(dir)? {
            match self.import(&archive).await {
                Ok(names) => {
                    tracing::info!(archive = %archive.display(), ?names, "imported images");
                    report.imported.push((archive, names));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "image import failed");
                    report.failed.push((archive, e));
                }
            }
        }
        Ok(report)
    }
}

/// Polls CRI `ImageStatus` until every name is present.
async fn wait_visible(
    cri: &CriRuntime,
    names: &[String],
    timeout: Duration,
) -> Result<(), ImportError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut missing: Vec<String> = names.to_vec();
    loop {
        let mut still = Vec::new();
        for name in missing {
            if cri.image_status(&name).await?.is_none() {
                still.push(name);
            }
        }
        if still.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ImportError::NotVisible {
                names: still,
                after: timeout,
            });
        }
        missing = still;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The archives in an airgap directory, sorted by name.
pub fn airgap_archives(dir: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let read_err = |source| ImportError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let mut archives = Vec::new();
    for entry in entries {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_archive = ARCHIVE_SUFFIXES.iter().any(|s| name.ends_with(s));
        if is_archive && entry.file_type().map_err(read_err)?.is_file() {
            archives.push(entry.path());
        }
    }
    archives.sort();
    Ok(archives)
}

/// ctr prints `unpacking NAME (sha256:…)...done` per image.
fn imported_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("unpacking "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_ctr_output() {
        let out = "unpacking skiff.local/busybox:1 (sha256:ab12)...done\n\
                   unpacking skiff.local/pause:1 (sha256:cd34)...done\n";
        assert_eq!(
            imported_names(out),
            ["skiff.local/busybox:1", "skiff.local/pause:1"]
        );
        assert!(imported_names("").is_empty());
    }

    #[test]
    fn airgap_directory_lists_archives_in_order_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.tar", "a.tar", "c.tar.gz", "notes.txt", "x.tar.partial"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("d.tar")).unwrap();
        let names: Vec<_> = airgap_archives(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.tar", "b.tar"]);
        assert!(
            airgap_archives(&dir.path().join("missing"))
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_failing_ctr_reports_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("ctr");
        skiff_testkit::write_executable(
            &fake,
            "#!/bin/sh\necho \"ctr: failed to dial $2\" >&2\nexit 1\n",
        );
        let importer = ImageImporter::new(dir.path().join("c.sock")).with_ctr(&fake);
        let err = importer
            .import(&dir.path().join("img.tar"))
            .await
            .unwrap_err();
        match err {
            ImportError::Failed { stderr, .. } => {
                assert!(stderr.contains("failed to dial"), "{stderr}");
                assert!(stderr.contains("c.sock"), "{stderr}");
            }
            other => panic!("unexpected: {other}"),
        }
    }
}
