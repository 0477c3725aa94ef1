//! Image archives in the docker-archive layout (`manifest.json`, a config
//! blob, one uncompressed layer), the format `ctr images import` and
//! `docker load` read. Everything is deterministic (zero timestamps and
//! owners), so building the same image twice gives the same digests and a
//! re-import is a no-op.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Errors while building or writing an image archive.
#[derive(Debug, thiserror::Error)]
pub enum ImageArchiveError {
    /// A host file to put in the image could not be read.
    #[error("reading {path}: {source}")]
    ReadHostFile {
        /// The host file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Appending to the in-memory tar failed (e.g. a path tar cannot hold).
    #[error("adding {path} to the image: {source}")]
    Tar {
        /// The path inside the image.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The archive could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The archive file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A path inside the image is not absolute or climbs out with `..`.
    #[error("invalid path in image: {0:?}")]
    InvalidPath(String),
}

/// A filesystem layer built in memory. Parent directories are added
/// automatically (mode 0755) before their entries.
pub struct LayerBuilder {
    tar: tar::Builder<Vec<u8>>,
    dirs: BTreeSet<String>,
}

impl Default for LayerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LayerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerBuilder")
            .field("dirs", &self.dirs)
            .finish_non_exhaustive()
    }
}

/// `/bin/sh` → `bin/sh`; rejects relative paths and `..`.
fn layer_path(path: &str) -> Result<String, ImageArchiveError> {
    let rel = path
        .strip_prefix('/')
        .ok_or_else(|| ImageArchiveError::InvalidPath(path.to_string()))?;
    let rel = rel.trim_end_matches('/');
    if rel.is_empty()
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(ImageArchiveError::InvalidPath(path.to_string()));
    }
    Ok(rel.to_string())
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h
}

impl LayerBuilder {
    /// An empty layer.
    pub fn new() -> Self {
        let mut tar = tar::Builder::new(Vec::new());
        tar.mode(tar::HeaderMode::Deterministic);
        Self {
            tar,
            dirs: BTreeSet::new(),
        }
    }

    fn parents(&mut self, rel: &str) -> Result<(), ImageArchiveError> {
        let mut prefix = String::new();
        let components: Vec<&str> = rel.split('/').collect();
        for c in &components[..components.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(c);
            if !self.dirs.contains(&prefix) {
                self.append_dir(&prefix.clone(), 0o755)?;
            }
        }
        Ok(())
    }

    fn append_dir(&mut self, rel: &str, mode: u32) -> Result<(), ImageArchiveError> {
        let mut h = header(tar::EntryType::Directory, mode, 0);
        let name = format!("{rel}/");
        self.tar
            .append_data(&mut h, &name, io::empty())
            .map_err(|source| ImageArchiveError::Tar { path: name, source })?;
        self.dirs.insert(rel.to_string());
        Ok(())
    }

    /// Adds a directory (e.g. `/tmp` with mode `0o1777`).
    pub fn dir(&mut self, path: &str, mode: u32) -> Result<&mut Self, ImageArchiveError> {
        let rel = layer_path(path)?;
        self.parents(&rel)?;
        if !self.dirs.contains(&rel) {
            self.append_dir(&rel, mode)?;
        }
        Ok(self)
    }

    /// Adds a regular file with the given contents.
    pub fn file(
        &mut self,
        path: &str,
        contents: &[u8],
        mode: u32,
    ) -> Result<&mut Self, ImageArchiveError> {
        let rel = layer_path(path)?;
        self.parents(&rel)?;
        let mut h = header(tar::EntryType::Regular, mode, contents.len() as u64);
        self.tar
            .append_data(&mut h, &rel, contents)
            .map_err(|source| ImageArchiveError::Tar { path: rel, source })?;
        Ok(self)
    }

    /// Adds a copy of a host file (e.g. `/bin/busybox`).
    pub fn host_file(
        &mut self,
        path: &str,
        host_path: &Path,
        mode: u32,
    ) -> Result<&mut Self, ImageArchiveError> {
        let contents = fs::read(host_path).map_err(|source| ImageArchiveError::ReadHostFile {
            path: host_path.to_path_buf(),
            source,
        })?;
        self.file(path, &contents, mode)
    }

    /// Adds a symbolic link at `path` pointing to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<&mut Self, ImageArchiveError> {
        let rel = layer_path(path)?;
        self.parents(&rel)?;
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        self.tar
            .append_link(&mut h, &rel, target)
            .map_err(|source| ImageArchiveError::Tar { path: rel, source })?;
        Ok(self)
    }

    /// The finished layer tar.
    pub fn finish(self) -> Result<Vec<u8>, ImageArchiveError> {
        self.tar
            .into_inner()
            .map_err(|source| ImageArchiveError::Tar {
                path: "<end of layer>".to_string(),
                source,
            })
    }
}

/// An image: a name, its process defaults, one layer.
#[derive(Debug, Clone, Default)]
pub struct ImageBuilder {
    reference: String,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    env: Vec<String>,
    working_dir: String,
    stop_signal: Option<String>,
    layer: Vec<u8>,
}

/// What was written: the digests containerd will report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// The image name (`RepoTags` entry).
    pub reference: String,
    /// `sha256:…` of the config blob: the image id CRI reports.
    pub config_digest: String,
    /// `sha256:…` of the uncompressed layer (its `rootfs.diff_ids` entry).
    pub layer_diff_id: String,
    /// Size of the archive in bytes.
    pub archive_size: u64,
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(data)))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// The OCI architecture name of the machine we run on.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl ImageBuilder {
    /// An image named `reference` (e.g. `skiff.local/busybox:1`) with the
    /// given layer and a default `PATH`.
    pub fn new(reference: impl Into<String>, layer: Vec<u8>) -> Self {
        Self {
            reference: reference.into(),
            env: vec![
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            ],
            working_dir: "/".to_string(),
            layer,
            ..Self::default()
        }
    }

    /// Sets the entrypoint.
    pub fn entrypoint<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.entrypoint = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the default arguments.
    pub fn cmd<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.cmd = args.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an environment variable `NAME=value`.
    pub fn env(mut self, var: impl Into<String>) -> Self {
        self.env.push(var.into());
        self
    }

    /// Sets the signal the runtime sends to stop the container.
    pub fn stop_signal(mut self, signal: impl Into<String>) -> Self {
        self.stop_signal = Some(signal.into());
        self
    }

    /// The image name.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The image config JSON (OCI image config, which docker-archive uses too).
    pub fn config_json(&self) -> Vec<u8> {
        let mut process = serde_json::json!({
            "Env": self.env,
            "Entrypoint": self.entrypoint,
            "Cmd": self.cmd,
            "WorkingDir": self.working_dir,
        });
        if let Some(signal) = &self.stop_signal {
            process["StopSignal"] = serde_json::Value::from(signal.clone());
        }
        let config = serde_json::json!({
            "architecture": host_architecture(),
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": process,
            "rootfs": {
                "type": "layers",
                "diff_ids": [sha256_digest(&self.layer)],
            },
            "history": [{
                "created": "1970-01-01T00:00:00Z",
                "created_by": "skiff image builder",
            }],
        });
        serde_json::to_vec(&config).unwrap_or_default()
    }

    /// The whole docker-archive tar, in memory.
    pub fn to_docker_archive(&self) -> Result<(Vec<u8>, ArchiveSummary), ImageArchiveError> {
        let config = self.config_json();
        let config_digest = sha256_digest(&config);
        let layer_diff_id = sha256_digest(&self.layer);
        let config_name = format!("{}.json", digest_hex(&config_digest));
        let layer_dir = digest_hex(&layer_diff_id).to_string();
        let layer_name = format!("{layer_dir}/layer.tar");
        let manifest = serde_json::json!([{
            "Config": config_name,
            "RepoTags": [self.reference],
            "Layers": [layer_name],
        }]);
        let manifest = serde_json::to_vec(&manifest).unwrap_or_default();

        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, kind: tar::EntryType, data: &[u8]| {
            let mode = if kind == tar::EntryType::Directory {
                0o755
            } else {
                0o644
            };
            let mut h = header(kind, mode, data.len() as u64);
            tar.append_data(&mut h, name, data)
                .map_err(|source| ImageArchiveError::Tar {
                    path: name.to_string(),
                    source,
                })
        };
        add(&format!("{layer_dir}/"), tar::EntryType::Directory, &[])?;
        add(&layer_name, tar::EntryType::Regular, &self.layer)?;
        add(&config_name, tar::EntryType::Regular, &config)?;
        add("manifest.json", tar::EntryType::Regular, &manifest)?;
        let bytes = tar.into_inner().map_err(|source| ImageArchiveError::Tar {
            path: "<end of archive>".to_string(),
            source,
        })?;
        let summary = ArchiveSummary {
            reference: self.reference.clone(),
            config_digest,
            layer_diff_id,
            archive_size: bytes.len() as u64,
        };
        Ok((bytes, summary))
    }

    /// Writes the docker-archive to `path` (atomically: an airgap directory
    /// scan never sees half an archive).
    pub fn write_docker_archive(&self, path: &Path) -> Result<ArchiveSummary, ImageArchiveError> {
        let (bytes, summary) = self.to_docker_archive()?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let write_err = |source| ImageArchiveError::Write {
            path: path.to_path_buf(),
            source,
        };
        fs::write(&tmp, &bytes).map_err(write_err)?;
        fs::rename(&tmp, path).map_err(write_err)?;
        Ok(summary)
    }
}

fn digest_hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Read;

    /// name → (entry type, contents or link target)
    fn entries(tar_bytes: &[u8]) -> BTreeMap<String, (tar::EntryType, Vec<u8>)> {
        let mut out = BTreeMap::new();
        let mut archive = tar::Archive::new(tar_bytes);
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let kind = entry.header().entry_type();
            let data = if kind == tar::EntryType::Symlink {
                entry
                    .link_name()
                    .unwrap()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes()
            } else {
                let mut v = Vec::new();
                entry.read_to_end(&mut v).unwrap();
                v
            };
            out.insert(name, (kind, data));
        }
        out
    }

    fn sample_layer() -> Vec<u8> {
        let mut l = LayerBuilder::new();
        l.file("/bin/tool", b"#!/bin/sh\necho hi\n", 0o755).unwrap();
        l.symlink("/usr/bin/tool", "/bin/tool").unwrap();
        l.dir("/tmp", 0o1777).unwrap();
        l.finish().unwrap()
    }

    #[test]
    fn layer_holds_files_links_and_their_parent_directories_first() {
        let layer = sample_layer();
        let mut archive = tar::Archive::new(&layer[..]);
        let order: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            order,
            [
                "bin/",
                "bin/tool",
                "usr/",
                "usr/bin/",
                "usr/bin/tool",
                "tmp/"
            ]
        );
        let e = entries(&layer);
        assert_eq!(e["bin/tool"].1, b"#!/bin/sh\necho hi\n");
        assert_eq!(
            e["usr/bin/tool"],
            (tar::EntryType::Symlink, b"/bin/tool".to_vec())
        );
        let mut archive = tar::Archive::new(&layer[..]);
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let h = entry.header();
            assert_eq!(
                (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
                (0, 0, 0)
            );
            if entry.path().unwrap().to_str() == Some("tmp/") {
                assert_eq!(h.mode().unwrap(), 0o1777);
            }
        }
    }

    #[test]
    fn paths_must_be_absolute_and_stay_inside_the_image() {
        let mut l = LayerBuilder::new();
        for bad in ["bin/x", "/", "/a/../b", "/a//b"] {
            assert!(matches!(
                l.file(bad, b"", 0o644),
                Err(ImageArchiveError::InvalidPath(_))
            ));
        }
    }

    #[test]
    fn docker_archive_manifest_config_and_diff_ids_agree() {
        let layer = sample_layer();
        let image = ImageBuilder::new("skiff.local/test:1", layer.clone())
            .entrypoint(["/bin/tool"])
            .cmd(["a", "b"])
            .env("GREETING=hi")
            .stop_signal("SIGINT");
        let (bytes, summary) = image.to_docker_archive().unwrap();
        assert_eq!(summary.archive_size, bytes.len() as u64);
        let e = entries(&bytes);

        let manifest: serde_json::Value = serde_json::from_slice(&e["manifest.json"].1).unwrap();
        let m = &manifest[0];
        assert_eq!(m["RepoTags"], serde_json::json!(["skiff.local/test:1"]));
        let config_name = m["Config"].as_str().unwrap();
        let layer_name = m["Layers"][0].as_str().unwrap();

        let config_bytes = &e[config_name].1;
        assert_eq!(sha256_digest(config_bytes), summary.config_digest);
        assert_eq!(
            config_name,
            format!("{}.json", digest_hex(&summary.config_digest))
        );
        let layer_bytes = &e[layer_name].1;
        assert_eq!(layer_bytes, &layer);
        assert_eq!(sha256_digest(layer_bytes), summary.layer_diff_id);

        let config: serde_json::Value = serde_json::from_slice(config_bytes).unwrap();
        assert_eq!(config["rootfs"]["type"], "layers");
        assert_eq!(
            config["rootfs"]["diff_ids"],
            serde_json::json!([summary.layer_diff_id])
        );
        assert_eq!(config["os"], "linux");
        assert_eq!(config["architecture"], host_architecture());
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/bin/tool"])
        );
        assert_eq!(config["config"]["Cmd"], serde_json::json!(["a", "b"]));
        assert_eq!(config["config"]["StopSignal"], "SIGINT");
        let env = config["config"]["Env"].as_array().unwrap();
        assert!(env.iter().any(|v| v.as_str().unwrap().starts_with("PATH=")));
        assert!(env.contains(&serde_json::json!("GREETING=hi")));
    }

    #[test]
    fn the_same_image_built_twice_has_the_same_digests() {
        let a = ImageBuilder::new("x:1", sample_layer()).entrypoint(["/bin/tool"]);
        let b = ImageBuilder::new("x:1", sample_layer()).entrypoint(["/bin/tool"]);
        let (bytes_a, sum_a) = a.to_docker_archive().unwrap();
        let (bytes_b, sum_b) = b.to_docker_archive().unwrap();
        assert_eq!(sum_a, sum_b);
        assert_eq!(bytes_a, bytes_b);
        let c = ImageBuilder::new("x:1", sample_layer()).entrypoint(["/bin/other"]);
        assert_ne!(
            c.to_docker_archive().unwrap().1.config_digest,
            sum_a.config_digest
        );
    }

    #[test]
    fn archive_is_written_whole_to_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img.tar");
        let image = ImageBuilder::new("x:1", sample_layer());
        let summary = image.write_docker_archive(&path).unwrap();
        let on_disk = fs::read(&path).unwrap();
        assert_eq!(on_disk.len() as u64, summary.archive_size);
        assert_eq!(on_disk, image.to_docker_archive().unwrap().0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
