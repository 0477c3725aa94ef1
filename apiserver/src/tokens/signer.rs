//! The service-account signing key: an ECDSA P-256 key created at first
//! start and kept (mode 0600) so tokens survive restarts.

use std::path::{Path, PathBuf};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};

use super::ISSUER;
use super::claims::Claims;

/// Why the signing key could not be loaded or a token not signed.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The key file could not be read.
    #[error("reading the service-account key {path}: {source}")]
    Read {
        /// The key file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A new key could not be written.
    #[error("writing the service-account key {path}: {message}")]
    Write {
        /// The key file.
        path: PathBuf,
        /// Why it could not be written.
        message: String,
    },
    /// The key file holds no usable key.
    #[error("the service-account key {path} is not an ECDSA P-256 PEM key: {message}")]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// Why the key is unusable.
        message: String,
    },
    /// A new key could not be generated.
    #[error("generating the service-account key: {0}")]
    Generate(String),
    /// A token could not be signed.
    #[error("signing a token: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// Signs and checks service-account JWTs with one key pair.
#[derive(Clone)]
pub(crate) struct TokenSigner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    key_id: String,
    /// The public key as a JWK, as service-account issuer discovery
    /// publishes it.
    jwk: serde_json::Value,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl TokenSigner {
    /// Loads the key at `path`, creating it first when absent.
    pub(crate) fn load_or_create(path: &Path) -> Result<Self, SignerError> {
        if !path.exists() {
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .map_err(|e| SignerError::Generate(e.to_string()))?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| SignerError::Write {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                })?;
            }
            skiff_common::files::write_private(path, key.serialize_pem().as_bytes()).map_err(
                |e| SignerError::Write {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                },
            )?;
        }
        let pem = std::fs::read_to_string(path).map_err(|source| SignerError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_pem(&pem).map_err(|message| SignerError::BadKey {
            path: path.to_path_buf(),
            message,
        })
    }

    /// A key that lives only as long as this process (servers without a
    /// data dir, tests).
    pub(crate) fn ephemeral() -> Result<Self, SignerError> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| SignerError::Generate(e.to_string()))?;
        Self::from_pem(&key.serialize_pem()).map_err(SignerError::Generate)
    }

    fn from_pem(pem: &str) -> Result<Self, String> {
        let pair = rcgen::KeyPair::from_pem(pem).map_err(|e| e.to_string())?;
        if pair.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
            return Err("unsupported key algorithm".into());
        }
        let encoding = EncodingKey::from_ec_pem(pem.as_bytes()).map_err(|e| e.to_string())?;
        let public = pair.public_key_pem();
        let decoding = DecodingKey::from_ec_pem(public.as_bytes()).map_err(|e| e.to_string())?;
        // Upstream's key id: a digest of the public key, so clients can tell
        // keys apart.
        use sha2::Digest;
        let digest = sha2::Sha256::digest(pair.public_key_raw());
        let key_id =
            base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, digest);
        // The raw P-256 public key is the uncompressed point: 0x04, X, Y.
        let point = pair.public_key_raw();
        let (x, y) = match point {
            [4, rest @ ..] if rest.len() == 64 => rest.split_at(32),
            _ => return Err("the public key is not an uncompressed P-256 point".into()),
        };
        let b64 = |bytes: &[u8]| {
            base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes)
        };
        let jwk = serde_json::json!({
            "use": "sig", "kty": "EC", "kid": key_id, "crv": "P-256", "alg": "ES256",
            "x": b64(x), "y": b64(y),
        });
        Ok(Self {
            encoding,
            decoding,
            key_id,
            jwk,
        })
    }

    /// The key set relying parties verify this server's tokens with.
    pub(crate) fn key_set(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.jwk] })
    }

    /// Signs `claims` into a compact JWT.
    pub(crate) fn sign(&self, claims: &Claims) -> Result<String, SignerError> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.key_id.clone());
        Ok(jsonwebtoken::encode(&header, claims, &self.encoding)?)
    }

    /// Checks signature, issuer, lifetime and that one of `audiences` is
    /// among the token's; returns its claims.
    pub(crate) fn verify(&self, token: &str, audiences: &[&str]) -> Option<Claims> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(audiences);
        validation.leeway = 0;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .ok()
            .map(|data| data.claims)
    }
}

#[cfg(test)]
mod tests {
    use super::super::claims::{KubernetesClaim, ObjectRef};
    use super::*;

    fn claims(exp_in: i64, aud: &str) -> Claims {
        let now = jiff::Timestamp::now().as_second();
        Claims {
            iss: ISSUER.into(),
            sub: "system:serviceaccount:ns:sa".into(),
            aud: vec![aud.into()],
            exp: now + exp_in,
            iat: now,
            nbf: now,
            jti: "j".into(),
            kubernetes: KubernetesClaim {
                namespace: "ns".into(),
                serviceaccount: ObjectRef {
                    name: "sa".into(),
                    uid: "u".into(),
                },
                node: None,
                pod: None,
                secret: None,
            },
        }
    }

    #[test]
    fn a_key_is_created_once_and_tokens_verify_after_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tls/service-account.key");
        let first = TokenSigner::load_or_create(&path).expect("create");
        let token = first.sign(&claims(600, ISSUER)).expect("sign");
        let again = TokenSigner::load_or_create(&path).expect("load");
        let back = again.verify(&token, &[ISSUER]).expect("valid after reload");
        assert_eq!(back.sub, "system:serviceaccount:ns:sa");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn expired_foreign_or_other_audience_tokens_are_refused() {
        let signer = TokenSigner::ephemeral().expect("key");
        let other = TokenSigner::ephemeral().expect("key");
        assert!(
            signer
                .verify(&signer.sign(&claims(-5, ISSUER)).expect("sign"), &[ISSUER])
                .is_none()
        );
        assert!(
            signer
                .verify(&other.sign(&claims(600, ISSUER)).expect("sign"), &[ISSUER])
                .is_none()
        );
        let vault = signer.sign(&claims(600, "vault")).expect("sign");
        assert!(signer.verify(&vault, &[ISSUER]).is_none());
        assert!(signer.verify(&vault, &["vault"]).is_some());
    }
}
