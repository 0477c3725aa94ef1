//! Bootstrap data, as k3s keeps it: the files every server of one cluster
//! must share (the cluster and front-proxy CAs with their keys, the clients'
//! certificates they signed, the service-account signing key, the static
//! token file and the managed encryption configuration) travel through the
//! datastore under one reserved key, [`KEY`], encrypted with a key derived
//! from the join token's secret. The first server on a datastore writes
//! them; a server that joins reads and decrypts them before it prepares its
//! certificates, so every server serves the same CA and accepts the same
//! tokens. Serving certificates stay each server's own (its own names).
//!
//! The key is outside `/registry/`, so no API request can name it, and the
//! value is ciphertext: whoever reads the datastore without the token learns
//! nothing. A wrong token fails to decrypt (AES-GCM authenticates) and the
//! server refuses to start.
//!
//! Cipher: PBKDF2-HMAC-SHA256 (ring) over the secret with a random salt
//! gives an AES-256-GCM key; the nonce is random and the key name is the
//! associated data. Iterations, salt and nonce are stored beside the
//! ciphertext.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use skiff_common::join_token::{self, JoinToken, TokenError};

/// The server token as bootstrap data needs it: the CA hash it names (if
/// any) and the secret the data's key is derived from.
#[derive(Clone)]
pub(crate) struct ServerToken {
    ca_hash: Option<String>,
    secret: String,
}

impl ServerToken {
    /// From `K10<hash>::server:<secret>`, or a bare secret (k3s's short form).
    fn from_join(token: JoinToken) -> Self {
        let secret = join_token::server_secret(&token.credential)
            .unwrap_or(&token.credential)
            .to_string();
        Self {
            ca_hash: token.ca_hash,
            secret,
        }
    }

    /// Whether the token names `ca_pem` (`None`: it names no CA).
    fn names_ca(&self, ca_pem: &[u8]) -> Option<bool> {
        self.ca_hash
            .as_ref()
            .map(|hash| *hash == join_token::ca_hash(ca_pem))
    }
}
use skiff_store::{Revision, Store, StoreError};

/// Where the bootstrap data is kept in the datastore: outside the API's
/// key space (`/registry/`).
pub(crate) const KEY: &str = "/skiff/bootstrap";

/// The data-dir files servers share: what snapshots carry (see
/// [`crate::snapshot::ATTACHMENTS`]) plus the front-proxy CA, whose
/// certificates extension API servers trust.
pub(crate) fn files() -> Vec<&'static str> {
    let mut files = crate::snapshot::ATTACHMENTS.to_vec();
    files.extend(["tls/front-proxy-ca.crt", "tls/front-proxy-ca.key"]);
    files
}

/// Leaves made for this host that a new CA invalidates: removed when a CA
/// arrives from the datastore, so they are issued again under it.
const SIGNED_BY: &[(&str, &[&str])] = &[
    (
        "tls/ca.crt",
        &["tls/serving.crt", "tls/serving.key", "tls/serving.sans"],
    ),
    (
        "tls/front-proxy-ca.crt",
        &["tls/front-proxy-client.crt", "tls/front-proxy-client.key"],
    ),
];

/// PBKDF2 rounds for new data (stored with it, so it can change).
const ITERATIONS: u32 = 100_000;

/// Why the bootstrap data could not be read, written or applied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BootstrapError {
    #[error("the datastore: {0}")]
    Store(#[from] StoreError),
    #[error(
        "the token does not match this cluster: the bootstrap data in the datastore cannot be decrypted with it (start with the token in the first server's DATA_DIR/token)"
    )]
    WrongToken,
    #[error(
        "the token's CA hash does not match the cluster's CA in the datastore (the token is another cluster's)"
    )]
    CaMismatch,
    #[error(
        "no bootstrap data in the datastore to join: start the first server on this datastore first"
    )]
    NothingToJoin,
    #[error(
        "another server wrote the cluster's bootstrap data at the same time; start this one again to join that cluster (with its token)"
    )]
    Raced,
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error(
        "the token's CA hash does not match this server's CA ({path}): the token is another cluster's"
    )]
    TokenNamesAnotherCa { path: PathBuf },
    #[error("the bootstrap data in the datastore is unreadable: {0}")]
    Corrupt(String),
    #[error("cannot {action} {path}: {source}")]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The stored value: the cipher's parameters and the ciphertext.
#[derive(Serialize, Deserialize)]
struct Envelope {
    version: u32,
    iterations: u32,
    salt: String,
    nonce: String,
    ciphertext: String,
}

/// The plaintext: each file's content and when it last changed.
#[derive(Serialize, Deserialize, Default, PartialEq, Debug)]
struct Bundle {
    files: BTreeMap<String, Entry>,
}

#[derive(Serialize, Deserialize, PartialEq, Debug, Clone)]
struct Entry {
    /// Base64 of the content.
    content: String,
    /// Modification time (ms since the epoch) of the copy it was read from.
    modified_ms: u64,
}

/// What [`prepare`] found, for [`publish`] after the server made whatever
/// files were missing.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The stored data's mod revision (`None`: nothing stored yet).
    stored: Option<Revision>,
    /// Whether some local file is newer than the stored copy.
    local_newer: bool,
}

/// Where the server keeps its token, in k3s's form.
const TOKEN_FILE: &str = "token";

/// The server's token: `--token`, else the one in `DATA_DIR/token`, else a
/// new random one (written out by [`keep_token`] once the CA is known).
pub(crate) fn token(data_dir: &Path, flag: Option<&str>) -> Result<ServerToken, BootstrapError> {
    if let Some(text) = flag {
        return Ok(ServerToken::from_join(JoinToken::parse(text)?));
    }
    let path = data_dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(ServerToken::from_join(JoinToken::parse(&text)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ServerToken {
            ca_hash: None,
            secret: format!("{:032x}", rand::random::<u128>()),
        }),
        Err(source) => Err(BootstrapError::File {
            action: "read",
            path,
            source,
        }),
    }
}

/// Once the CA is ready: refuses a token naming another CA, and writes
/// `DATA_DIR/token` as `K10<CA hash>::server:<secret>` when it says
/// anything else (the API server then keeps that secret).
pub(crate) fn keep_token(
    data_dir: &Path,
    token: &ServerToken,
    ca_pem: &str,
) -> Result<(), BootstrapError> {
    if token.names_ca(ca_pem.as_bytes()) == Some(false) {
        let path = data_dir.join("tls/ca.crt");
        return Err(BootstrapError::TokenNamesAnotherCa { path });
    }
    let path = data_dir.join(TOKEN_FILE);
    let full = JoinToken::format(
        ca_pem.as_bytes(),
        &join_token::server_credential(&token.secret),
    );
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current.trim() != full {
        write_private(&path, format!("{full}\n").as_bytes())?;
    }
    Ok(())
}

/// Before the server loads its certificates: reads the bootstrap data, if
/// any, checks that `token` opens it (and names its CA, when the token
/// carries a hash) and writes the shared files into `data_dir`. A local file
/// newer than the stored copy is kept (and published later) unless
/// `joining`, where the cluster's copy always wins. With `joining` and no
/// data stored, fails: there is no cluster to join.
pub(crate) async fn prepare(
    store: &dyn Store,
    data_dir: &Path,
    token: &ServerToken,
    joining: bool,
) -> Result<Prepared, BootstrapError> {
    let Some(stored) = store.get(KEY).await? else {
        if joining {
            return Err(BootstrapError::NothingToJoin);
        }
        return Ok(Prepared {
            stored: None,
            local_newer: true,
        });
    };
    let bundle = open(&stored.value, &token.secret)?;
    let ca = bundle
        .files
        .get("tls/ca.crt")
        .ok_or_else(|| BootstrapError::Corrupt("no CA certificate".into()))?;
    let ca_pem = decode(ca)?;
    if token.names_ca(&ca_pem) == Some(false) {
        return Err(BootstrapError::CaMismatch);
    }
    let mut local_newer = false;
    for (name, entry) in &bundle.files {
        if !files().contains(&name.as_str()) {
            // Only the files this version knows are ever written.
            continue;
        }
        let path = data_dir.join(name);
        let content = decode(entry)?;
        let local = read_optional(&path)?;
        if local.as_ref().map(|(c, _)| c) == Some(&content) {
            continue;
        }
        if let Some((_, modified_ms)) = &local
            && !joining
            && *modified_ms > entry.modified_ms
        {
            local_newer = true;
            continue;
        }
        write_private(&path, &content)?;
        if let Some((_, leaves)) = SIGNED_BY.iter().find(|(ca, _)| *ca == name) {
            for leaf in *leaves {
                let _ = std::fs::remove_file(data_dir.join(leaf));
            }
        }
        tracing::info!(file = %name, "took the cluster's copy from the datastore");
    }
    Ok(Prepared {
        stored: Some(stored.mod_revision),
        local_newer,
    })
}

/// After the server made its files: stores them for the other servers when
/// nothing was stored yet (create-if-absent: of two first servers racing,
/// one wins and the other is told to start again) or a local file is newer
/// (compare-and-swap on the revision [`prepare`] read).
pub(crate) async fn publish(
    store: &dyn Store,
    data_dir: &Path,
    token: &ServerToken,
    prepared: Prepared,
) -> Result<(), BootstrapError> {
    if !prepared.local_newer {
        return Ok(());
    }
    let mut bundle = Bundle::default();
    for name in files() {
        if let Some((content, modified_ms)) = read_optional(&data_dir.join(name))? {
            bundle.files.insert(
                name.to_string(),
                Entry {
                    content: B64.encode(content),
                    modified_ms,
                },
            );
        }
    }
    let sealed = seal(&bundle, &token.secret, ITERATIONS)?;
    let written = match prepared.stored {
        None => store.create(KEY, sealed.into()).await,
        Some(revision) => store.update(KEY, sealed.into(), Some(revision)).await,
    };
    match written {
        Ok(_) => {
            tracing::info!(key = KEY, "bootstrap data stored for the other servers");
            Ok(())
        }
        Err(StoreError::AlreadyExists { .. } | StoreError::Conflict { .. }) => {
            Err(BootstrapError::Raced)
        }
        Err(e) => Err(e.into()),
    }
}

fn derive_key(secret: &str, salt: &[u8], iterations: u32) -> Result<[u8; 32], BootstrapError> {
    let rounds = NonZeroU32::new(iterations)
        .ok_or_else(|| BootstrapError::Corrupt("zero iterations".into()))?;
    let mut key = [0u8; 32];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        rounds,
        salt,
        secret.as_bytes(),
        &mut key,
    );
    Ok(key)
}

/// `msg` with the store key as associated data, so that data sealed for
/// the bootstrap key opens only there; one definition keeps `seal` and
/// `open` binding the same.
fn bound_to_key(msg: &[u8]) -> Payload<'_, 'static> {
    Payload {
        msg,
        aad: KEY.as_bytes(),
    }
}

fn seal(bundle: &Bundle, secret: &str, iterations: u32) -> Result<Vec<u8>, BootstrapError> {
    let salt: [u8; 16] = rand::random();
    let nonce: [u8; 12] = rand::random();
    let key = derive_key(secret, &salt, iterations)?;
    let plaintext =
        serde_json::to_vec(bundle).map_err(|e| BootstrapError::Corrupt(e.to_string()))?;
    let ciphertext = Aes256Gcm::new(&key.into())
        .encrypt(Nonce::from_slice(&nonce), bound_to_key(&plaintext))
        .map_err(|_| BootstrapError::Corrupt("encryption failed".into()))?;
    let envelope = Envelope {
        version: 1,
        iterations,
        salt: B64.encode(salt),
        nonce: B64.encode(nonce),
        ciphertext: B64.encode(ciphertext),
    };
    serde_json::to_vec(&envelope).map_err(|e| BootstrapError::Corrupt(e.to_string()))
}

fn open(stored: &[u8], secret: &str) -> Result<Bundle, BootstrapError> {
    let corrupt = |what: &str| BootstrapError::Corrupt(what.to_string());
    let envelope: Envelope =
        serde_json::from_slice(stored).map_err(|e| BootstrapError::Corrupt(e.to_string()))?;
    if envelope.version != 1 {
        return Err(corrupt("unknown version"));
    }
    // Bounded, so a planted envelope cannot make start-up spin for hours.
    if envelope.iterations > 10_000_000 {
        return Err(corrupt("too many iterations"));
    }
    let salt = B64.decode(&envelope.salt).map_err(|_| corrupt("salt"))?;
    let nonce = B64.decode(&envelope.nonce).map_err(|_| corrupt("nonce"))?;
    if nonce.len() != 12 {
        return Err(corrupt("nonce length"));
    }
    let ciphertext = B64
        .decode(&envelope.ciphertext)
        .map_err(|_| corrupt("ciphertext"))?;
    let key = derive_key(secret, &salt, envelope.iterations)?;
    let plaintext = Aes256Gcm::new(&key.into())
        .decrypt(Nonce::from_slice(&nonce), bound_to_key(&ciphertext))
        .map_err(|_| BootstrapError::WrongToken)?;
    serde_json::from_slice(&plaintext).map_err(|e| BootstrapError::Corrupt(e.to_string()))
}

fn decode(entry: &Entry) -> Result<Vec<u8>, BootstrapError> {
    B64.decode(&entry.content)
        .map_err(|_| BootstrapError::Corrupt("file content".into()))
}

/// A file's content and modification time (ms), if it exists.
fn read_optional(path: &Path) -> Result<Option<(Vec<u8>, u64)>, BootstrapError> {
    let error = |action| {
        move |source| BootstrapError::File {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let content = match std::fs::read(path) {
        Ok(content) => content,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error("read")(e)),
    };
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(error("stat"))?;
    let ms = modified
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    Ok(Some((content, ms)))
}

/// Writes a shared file 0600 (keys among them), whole or not at all, in
/// a 0700 directory.
fn write_private(path: &Path, content: &[u8]) -> Result<(), BootstrapError> {
    skiff_common::files::write_private(path, content).map_err(|e| BootstrapError::File {
        action: e.action,
        path: e.path,
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> Bundle {
        let mut bundle = Bundle::default();
        bundle.files.insert(
            "tls/ca.crt".into(),
            Entry {
                content: B64.encode("CA"),
                modified_ms: 1,
            },
        );
        bundle
    }

    #[test]
    fn sealed_data_opens_only_with_its_secret() {
        let sealed = seal(&bundle(), "right", 1000).unwrap();
        assert_eq!(open(&sealed, "right").unwrap(), bundle());
        assert!(matches!(
            open(&sealed, "wrong"),
            Err(BootstrapError::WrongToken)
        ));
        let text = String::from_utf8(sealed.clone()).unwrap();
        assert!(!text.contains(&B64.encode("CA")), "the plaintext leaked");
    }

    #[test]
    fn tampered_data_is_refused() {
        let sealed = seal(&bundle(), "right", 1000).unwrap();
        let mut envelope: Envelope = serde_json::from_slice(&sealed).unwrap();
        let mut ciphertext = B64.decode(&envelope.ciphertext).unwrap();
        ciphertext[0] ^= 1;
        envelope.ciphertext = B64.encode(ciphertext);
        let tampered = serde_json::to_vec(&envelope).unwrap();
        assert!(matches!(
            open(&tampered, "right"),
            Err(BootstrapError::WrongToken)
        ));
        envelope.iterations = u32::MAX;
        let slow = serde_json::to_vec(&envelope).unwrap();
        assert!(matches!(
            open(&slow, "right"),
            Err(BootstrapError::Corrupt(_))
        ));
    }

    /// A store of its own, in a temporary directory.
    fn store(dir: &Path) -> skiff_store::SledStore {
        skiff_store::SledStore::open(skiff_store::SledConfig::new(dir.join("store")))
            .expect("open the store")
    }

    fn token(secret: &str) -> ServerToken {
        ServerToken::from_join(JoinToken::parse(secret).expect("token"))
    }

    fn full_token(ca_pem: &[u8], secret: &str) -> ServerToken {
        let text = JoinToken::format(ca_pem, &join_token::server_credential(secret));
        token(&text)
    }

    #[tokio::test]
    async fn a_joining_server_takes_the_first_ones_files_and_only_with_its_token() {
        let root = tempfile::tempdir().unwrap();
        let store = store(root.path());
        let (first, second) = (root.path().join("first"), root.path().join("second"));
        std::fs::create_dir_all(first.join("tls")).unwrap();
        std::fs::write(first.join("tls/ca.crt"), "CA").unwrap();
        std::fs::write(first.join("tls/ca.key"), "CA KEY").unwrap();
        std::fs::write(first.join("token.csv"), "t,admin,1").unwrap();

        // Joining before any server stored anything: nothing to join.
        assert!(matches!(
            prepare(&store, &second, &token("s3cret"), true).await,
            Err(BootstrapError::NothingToJoin)
        ));
        let prepared = prepare(&store, &first, &token("s3cret"), false)
            .await
            .unwrap();
        publish(&store, &first, &token("s3cret"), prepared)
            .await
            .unwrap();
        let sealed = store.get(KEY).await.unwrap().expect("stored");
        assert!(!String::from_utf8_lossy(&sealed.value).contains("CA KEY"));

        // The wrong secret, or a hash naming another CA, is refused and
        // writes nothing.
        assert!(matches!(
            prepare(&store, &second, &token("wrong"), true).await,
            Err(BootstrapError::WrongToken)
        ));
        let other_ca = full_token(b"another CA", "s3cret");
        assert!(matches!(
            prepare(&store, &second, &other_ca, true).await,
            Err(BootstrapError::CaMismatch)
        ));
        assert!(!second.join("tls/ca.key").exists());

        // A stale serving certificate of the joining host goes with its CA.
        std::fs::create_dir_all(second.join("tls")).unwrap();
        std::fs::write(second.join("tls/ca.crt"), "OWN CA").unwrap();
        std::fs::write(second.join("tls/serving.crt"), "OWN SERVING").unwrap();
        let full = full_token(b"CA", "s3cret");
        let prepared = prepare(&store, &second, &full, true).await.unwrap();
        for (file, content) in [
            ("tls/ca.crt", "CA"),
            ("tls/ca.key", "CA KEY"),
            ("token.csv", "t,admin,1"),
        ] {
            assert_eq!(std::fs::read_to_string(second.join(file)).unwrap(), content);
        }
        assert!(!second.join("tls/serving.crt").exists());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(second.join("tls/ca.key"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        // Nothing newer here: nothing published again.
        publish(&store, &second, &full, prepared).await.unwrap();
        assert_eq!(
            store.get(KEY).await.unwrap().unwrap().mod_revision,
            sealed.mod_revision
        );

        // Two first servers racing: the second to store is told so.
        let late = Prepared {
            stored: None,
            local_newer: true,
        };
        assert!(matches!(
            publish(&store, &first, &token("s3cret"), late).await,
            Err(BootstrapError::Raced)
        ));
        store.close().await.unwrap();
    }
}
