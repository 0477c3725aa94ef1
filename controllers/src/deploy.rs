//! Auto-deployed manifests, as k3s's deploy controller: the YAML and JSON
//! files of one directory (`DATA_DIR/server/manifests`) are applied at start
//! and again whenever one changes, by server-side apply under the field
//! manager `skiff-deploy` (forced, so the files win conflicts).
//!
//! - A file may hold several documents (`---`, or concatenated JSON) and
//!   `kind: List`s; empty documents are skipped.
//! - `foo.yaml.skip` next to `foo.yaml` turns `foo.yaml` off.
//! - Removing a file leaves its objects alone (as k3s).
//! - Namespaced objects without a namespace go to `kube-system`, where k3s
//!   puts them.
//! - Every apply of a file is reported as an Event in `kube-system` about
//!   `Addon <file stem>` (k3s's name for a manifest file): `AppliedManifest`
//!   or `ApplyManifestFailed` with the error, and logged. A failed file is
//!   retried every [`RETRY`] even unchanged (a CRD it needs may be coming);
//!   one file's failure never holds up the others.
//!
//! The directory is polled (every [`POLL`]): a stat per file, and a file is
//! read only when its size or modification time moved.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{ApiResource, Scope};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::Value;

use crate::events::EventRecorder;

/// The field manager every apply uses (k3s's deploy controller has its own
/// too), so `managedFields` tell what came from the directory.
pub const FIELD_MANAGER: &str = "skiff-deploy";
/// How often the directory is looked at.
pub const POLL: Duration = Duration::from_secs(2);
/// How soon an unchanged file whose apply failed is tried again.
pub const RETRY: Duration = Duration::from_secs(15);
/// Where Events go and objects without a namespace are applied.
pub const NAMESPACE: &str = "kube-system";

/// Why a file, or one of its objects, was not applied.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A document is not valid YAML or JSON.
    #[error("{path}: document {index}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The document's position in the file, from 1.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A document is not a Kubernetes object.
    #[error("{path}: document {index}: {message}")]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// The document's position in the file, from 1.
        index: usize,
        /// What is missing.
        message: String,
    },
    /// The API server does not serve the object's kind.
    #[error("{path}: {api_version} {kind} {name:?}: kind not served: {source}")]
    Discovery {
        /// The file.
        path: PathBuf,
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// What discovery said (boxed: kube's errors are large).
        source: Box<kube::Error>,
    },
    /// The API server refused the apply.
    #[error("{path}: {kind} {name:?}: {source}")]
    Apply {
        /// The file.
        path: PathBuf,
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The API server's answer.
        source: Box<kube::Error>,
    },
}

/// One object a file declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The object as written (a List's items are separate manifests).
    pub object: Value,
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// Reads the objects of one file: YAML documents (or JSON values for
/// `.json`), with `List`s expanded and empty documents skipped.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Manifest>, DeployError> {
    let parse_error = |index: usize, message: String| DeployError::Parse {
        path: path.to_path_buf(),
        index,
        message,
    };
    let mut documents = Vec::new();
    if path.extension().is_some_and(|e| e == "json") {
        for (i, value) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            documents.push(value.map_err(|e| parse_error(i + 1, e.to_string()))?);
        }
    } else {
        for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            documents
                .push(Value::deserialize(document).map_err(|e| parse_error(i + 1, e.to_string()))?);
        }
    }
    let mut manifests = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let items = if document["kind"] == "List" && document["items"].is_array() {
            document["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![document]
        };
        for object in items {
            manifests.push(manifest(path, i + 1, object)?);
        }
    }
    Ok(manifests)
}

fn manifest(path: &Path, index: usize, object: Value) -> Result<Manifest, DeployError> {
    let field = |name: &str| -> Result<String, DeployError> {
        let value = match name {
            "name" => &object["metadata"]["name"],
            other => &object[other],
        };
        match value.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(DeployError::NotAnObject {
                path: path.to_path_buf(),
                index,
                message: format!("no {name}"),
            }),
        }
    };
    if !object.is_object() {
        return Err(DeployError::NotAnObject {
            path: path.to_path_buf(),
            index,
            message: "not a mapping".into(),
        });
    }
    Ok(Manifest {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        name: field("name")?,
        object,
    })
}

/// The files of `dir` to apply, sorted by name: `.yaml`, `.yml` and `.json`
/// files that are not hidden and have no `.skip` twin.
pub fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_type()
            .is_ok_and(|t| t.is_file() || t.is_symlink())
        {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    let mut files: Vec<PathBuf> = names
        .iter()
        .filter(|name| !name.starts_with('.'))
        .filter(|name| {
            [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext))
        })
        .filter(|name| !names.contains(&format!("{name}.skip")))
        .map(|name| dir.join(name))
        .collect();
    files.sort();
    Ok(files)
}

/// The resource and whether it is namespaced, per (apiVersion, kind).
type Kinds = HashMap<(String, String), (ApiResource, bool)>;

/// What is known of one file since it was last applied.
struct Seen {
    stamp: (Option<SystemTime>, u64),
    digest: u64,
    /// When its apply failed, if it did.
    failed_at: Option<Instant>,
}

/// Applies the manifests of `dir` until `stop` resolves. The directory is
/// created when missing. `client` is the deployer's own identity.
pub async fn run(client: Client, dir: PathBuf, stop: impl std::future::Future<Output = ()>) {
    if let Err(error) = std::fs::create_dir_all(&dir) {
        tracing::error!(dir = %dir.display(), %error, "cannot create the manifests directory; auto-deploy is off");
        return;
    }
    let events = EventRecorder::new(client.clone(), FIELD_MANAGER);
    let mut deployer = Deployer {
        client,
        events,
        seen: HashMap::new(),
    };
    tokio::pin!(stop);
    loop {
        deployer.pass(&dir).await;
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

struct Deployer {
    client: Client,
    events: EventRecorder,
    seen: HashMap<PathBuf, Seen>,
}

impl Deployer {
    /// Applies every file that changed (or failed a while ago).
    async fn pass(&mut self, dir: &Path) {
        let files = match manifest_files(dir) {
            Ok(files) => files,
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot list the manifests directory");
                return;
            }
        };
        // A file removed and put back is applied again.
        self.seen.retain(|path, _| files.contains(path));
        // Discovery answers are reused within one pass only: a CRD applied
        // now serves its kind in a later pass.
        let mut kinds = HashMap::new();
        for path in files {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let stamp = (meta.modified().ok(), meta.len());
            if let Some(seen) = self.seen.get(&path) {
                let retry_due = seen.failed_at.is_some_and(|at| at.elapsed() >= RETRY);
                if seen.stamp == stamp && !retry_due {
                    continue;
                }
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(source) => {
                    self.report(
                        &path,
                        Err(vec![DeployError::Read {
                            path: path.clone(),
                            source,
                        }]),
                    );
                    continue;
                }
            };
            let digest = digest(&text);
            if let Some(seen) = self.seen.get_mut(&path)
                && seen.digest == digest
                && seen.failed_at.is_none()
            {
                // Touched, not changed.
                seen.stamp = stamp;
                continue;
            }
            let outcome = self.apply_file(&path, &text, &mut kinds).await;
            let failed = outcome.is_err();
            self.report(&path, outcome);
            self.seen.insert(
                path,
                Seen {
                    stamp,
                    digest,
                    failed_at: failed.then(Instant::now),
                },
            );
        }
    }

    /// Applies every object of one file; the errors of those that failed.
    async fn apply_file(
        &self,
        path: &Path,
        text: &str,
        kinds: &mut Kinds,
    ) -> Result<usize, Vec<DeployError>> {
        let manifests = parse(path, text).map_err(|e| vec![e])?;
        let mut errors = Vec::new();
        for manifest in &manifests {
            if let Err(error) = self.apply(path, manifest, kinds).await {
                errors.push(error);
            }
        }
        if errors.is_empty() {
            Ok(manifests.len())
        } else {
            Err(errors)
        }
    }

    async fn apply(
        &self,
        path: &Path,
        manifest: &Manifest,
        kinds: &mut Kinds,
    ) -> Result<(), DeployError> {
        let key = (manifest.api_version.clone(), manifest.kind.clone());
        if !kinds.contains_key(&key) {
            let (group, version) = match manifest.api_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", manifest.api_version.as_str()),
            };
            let gvk = GroupVersionKind::gvk(group, version, &manifest.kind);
            let found = kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .map(|(resource, caps)| (resource, caps.scope == Scope::Namespaced));
            let found = found.map_err(|source| DeployError::Discovery {
                path: path.to_path_buf(),
                api_version: manifest.api_version.clone(),
                kind: manifest.kind.clone(),
                name: manifest.name.clone(),
                source: Box::new(source),
            })?;
            kinds.insert(key.clone(), found);
        }
        let Some((resource, namespaced)) = kinds.get(&key) else {
            return Ok(());
        };
        let mut object = manifest.object.clone();
        let api: Api<DynamicObject> = if *namespaced {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .filter(|ns| !ns.is_empty())
                .unwrap_or(NAMESPACE)
                .to_string();
            object["metadata"]["namespace"] = Value::from(namespace.as_str());
            Api::namespaced_with(self.client.clone(), &namespace, resource)
        } else {
            Api::all_with(self.client.clone(), resource)
        };
        api.patch(
            &manifest.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .map(drop)
        .map_err(|source| DeployError::Apply {
            path: path.to_path_buf(),
            kind: manifest.kind.clone(),
            name: manifest.name.clone(),
            source: Box::new(source),
        })
    }

    /// Logs the outcome of one file and records it as an Event.
    fn report(&self, path: &Path, outcome: Result<usize, Vec<DeployError>>) {
        let regarding = addon(path);
        let file = path.display().to_string();
        match outcome {
            Ok(count) => {
                tracing::info!(file, objects = count, "manifest applied");
                self.events.normal(
                    &regarding,
                    "AppliedManifest",
                    "Apply",
                    format!("Applied {count} object(s) from {file}"),
                );
            }
            Err(errors) => {
                for error in &errors {
                    tracing::warn!(file, %error, "manifest not applied");
                }
                let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
                self.events
                    .warning(&regarding, "ApplyManifestFailed", "Apply", all.join("; "));
            }
        }
    }
}

/// What a file's Events are about: `Addon <stem>` in kube-system, as k3s
/// reports on its Addon objects (not a kind skiff serves; the reference
/// only names the file in `kubectl get events`).
fn addon(path: &Path) -> ObjectReference {
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = [".yaml", ".yml", ".json"]
        .iter()
        .find_map(|ext| stem.strip_suffix(ext))
        .unwrap_or(&stem);
    // Event names derive from this name, so it must be a DNS subdomain.
    let mut name: String = stem
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    name = name.trim_matches(|c| c == '-' || c == '.').to_string();
    if name.is_empty() {
        name = "manifest".into();
    }
    ObjectReference {
        kind: Some("Addon".into()),
        namespace: Some(NAMESPACE.into()),
        name: Some(name),
        ..Default::default()
    }
}

fn digest(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lists_and_empty_documents() {
        let text = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: b\n\
                    - apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: c\n    namespace: x\n";
        let found = parse(Path::new("m.yaml"), text).expect("parses");
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|m| (m.kind.as_str(), m.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [("ConfigMap", "a"), ("Secret", "b"), ("Deployment", "c")]
        );
        assert_eq!(found[2].api_version, "apps/v1");
    }

    #[test]
    fn json_files_may_hold_several_values() {
        let text = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}
                      {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}"#;
        let found = parse(Path::new("m.json"), text).expect("parses");
        assert_eq!(found.len(), 2);
    }

    #[test]
    fn broken_documents_name_the_file_and_the_document() {
        let bad_yaml =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: [unclosed\n";
        let error = parse(Path::new("/m/broken.yaml"), bad_yaml).expect_err("invalid YAML");
        assert!(
            error
                .to_string()
                .starts_with("/m/broken.yaml: document 2: "),
            "{error}"
        );
        let nameless = "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n";
        let error = parse(Path::new("n.yaml"), nameless).expect_err("no name");
        assert_eq!(error.to_string(), "n.yaml: document 1: no name");
        let scalar = parse(Path::new("s.yaml"), "just text\n").expect_err("not an object");
        assert_eq!(scalar.to_string(), "s.yaml: document 1: not a mapping");
    }

    #[test]
    fn skip_files_turn_their_twin_off() {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [
            "b.yaml",
            "a.json",
            "c.yml",
            "c.yml.skip",
            "notes.txt",
            ".hidden.yaml",
            "d.yaml.skip",
        ] {
            std::fs::write(dir.path().join(name), "").expect("write");
        }
        let files = manifest_files(dir.path()).expect("lists");
        let names: Vec<String> = files
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["a.json", "b.yaml"]);
    }

    #[test]
    fn events_regard_the_file_as_an_addon() {
        let reference = addon(Path::new("/d/My Web_App.yaml"));
        assert_eq!(reference.name.as_deref(), Some("my-web-app"));
        assert_eq!(reference.kind.as_deref(), Some("Addon"));
        assert_eq!(reference.namespace.as_deref(), Some(NAMESPACE));
    }
}
