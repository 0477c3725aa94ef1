//! The ciphers of upstream's encryption providers, one key each: `aesgcm`
//! (AES-GCM, random 12-byte nonce, the storage key as authenticated data),
//! `aescbc` (AES-CBC with PKCS#7 padding and a random IV), `secretbox`
//! (XSalsa20-Poly1305, random 24-byte nonce) and `identity` (no change).
//! A value written by a keyed provider starts with
//! `k8s:enc:<provider>:v1:<key name>:`, followed by the nonce or IV and the
//! ciphertext, as upstream lays it out.
//!
//! This module holds key material only inside the cipher objects; it must
//! never print, log or return a key.

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm};
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, InnerIvInit};
use crypto_secretbox::XSalsa20Poly1305;

use super::EncryptionError;

/// What every encrypted value starts with.
pub(super) const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// Bytes of an AES-GCM nonce.
const GCM_NONCE: usize = 12;
/// Bytes of an AES block, and so of the CBC IV.
const AES_BLOCK: usize = 16;
/// Bytes of an XSalsa20 nonce.
const SECRETBOX_NONCE: usize = 24;

type Aes192Gcm = AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>;

/// The provider types of upstream's `EncryptionConfiguration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// `aesgcm`: AES-GCM with a random nonce.
    AesGcm,
    /// `aescbc`: AES-CBC with PKCS#7 padding.
    AesCbc,
    /// `secretbox`: XSalsa20-Poly1305.
    Secretbox,
    /// `identity`: no encryption (values written as they are).
    Identity,
}

impl ProviderKind {
    /// The name in the configuration and in the value prefix.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::AesGcm => "aesgcm",
            ProviderKind::AesCbc => "aescbc",
            ProviderKind::Secretbox => "secretbox",
            ProviderKind::Identity => "identity",
        }
    }

    /// How status output names the cipher (as k3s prints its key types).
    pub fn cipher_name(self) -> &'static str {
        match self {
            ProviderKind::AesGcm => "AES-GCM",
            ProviderKind::AesCbc => "AES-CBC",
            ProviderKind::Secretbox => "SecretBox",
            ProviderKind::Identity => "Identity",
        }
    }

    /// The key lengths (bytes) the provider accepts.
    pub fn key_sizes(self) -> &'static [usize] {
        match self {
            ProviderKind::AesGcm | ProviderKind::AesCbc => &[16, 24, 32],
            ProviderKind::Secretbox => &[32],
            ProviderKind::Identity => &[],
        }
    }

    /// The provider named `name` in a configuration.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            ProviderKind::AesGcm,
            ProviderKind::AesCbc,
            ProviderKind::Secretbox,
            ProviderKind::Identity,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

enum Cipher {
    Gcm128(Box<Aes128Gcm>),
    Gcm192(Box<Aes192Gcm>),
    Gcm256(Box<Aes256Gcm>),
    Cbc128(Box<aes::Aes128>),
    Cbc192(Box<aes::Aes192>),
    Cbc256(Box<aes::Aes256>),
    Secretbox(Box<XSalsa20Poly1305>),
    Identity,
}

/// One provider with one key (or `identity`), ready to transform values.
pub(crate) struct Provider {
    kind: ProviderKind,
    key_name: String,
    /// `k8s:enc:<kind>:v1:<key name>:`; empty for identity.
    prefix: Vec<u8>,
    cipher: Cipher,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("kind", &self.kind)
            .field("key_name", &self.key_name)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// The provider that stores values as they are.
    pub(crate) fn identity() -> Self {
        Self {
            kind: ProviderKind::Identity,
            key_name: String::new(),
            prefix: Vec::new(),
            cipher: Cipher::Identity,
        }
    }

    /// A keyed provider; `secret` is the raw key (already base64-decoded).
    pub(crate) fn keyed(
        kind: ProviderKind,
        key_name: &str,
        secret: &[u8],
    ) -> Result<Self, EncryptionError> {
        let bad_length = || EncryptionError::KeyLength {
            provider: kind.name(),
            key: key_name.to_string(),
            length: secret.len(),
            allowed: kind.key_sizes(),
        };
        let cipher = match (kind, secret.len()) {
            (ProviderKind::AesGcm, 16) => Cipher::Gcm128(Box::new(
                Aes128Gcm::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::AesGcm, 24) => Cipher::Gcm192(Box::new(
                Aes192Gcm::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::AesGcm, 32) => Cipher::Gcm256(Box::new(
                Aes256Gcm::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::AesCbc, 16) => Cipher::Cbc128(Box::new(
                aes::Aes128::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::AesCbc, 24) => Cipher::Cbc192(Box::new(
                aes::Aes192::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::AesCbc, 32) => Cipher::Cbc256(Box::new(
                aes::Aes256::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::Secretbox, 32) => Cipher::Secretbox(Box::new(
                XSalsa20Poly1305::new_from_slice(secret).map_err(|_| bad_length())?,
            )),
            (ProviderKind::Identity, _) => return Ok(Self::identity()),
            _ => return Err(bad_length()),
        };
        Ok(Self {
            kind,
            key_name: key_name.to_string(),
            prefix: format!("k8s:enc:{}:v1:{key_name}:", kind.name()).into_bytes(),
            cipher,
        })
    }

    pub(crate) fn kind(&self) -> ProviderKind {
        self.kind
    }

    /// The key's name (empty for identity).
    pub(crate) fn key_name(&self) -> &str {
        &self.key_name
    }

    /// Whether `stored` carries this provider's prefix (identity: whether it
    /// carries no encryption prefix at all).
    pub(crate) fn wrote(&self, stored: &[u8]) -> bool {
        match self.cipher {
            Cipher::Identity => !stored.starts_with(ENCRYPTED_PREFIX),
            _ => stored.starts_with(&self.prefix),
        }
    }

    /// The stored form of `plaintext` for storage key `key`.
    pub(crate) fn encrypt(&self, plaintext: &[u8], key: &str) -> Result<Vec<u8>, EncryptionError> {
        let mut out = self.prefix.clone();
        match &self.cipher {
            Cipher::Identity => {
                out.extend_from_slice(plaintext);
                return Ok(out);
            }
            Cipher::Gcm128(c) => seal_gcm(c.as_ref(), plaintext, key, &mut out)?,
            Cipher::Gcm192(c) => seal_gcm(c.as_ref(), plaintext, key, &mut out)?,
            Cipher::Gcm256(c) => seal_gcm(c.as_ref(), plaintext, key, &mut out)?,
            Cipher::Cbc128(c) => seal_cbc::<aes::Aes128>(c.as_ref(), plaintext, &mut out)?,
            Cipher::Cbc192(c) => seal_cbc::<aes::Aes192>(c.as_ref(), plaintext, &mut out)?,
            Cipher::Cbc256(c) => seal_cbc::<aes::Aes256>(c.as_ref(), plaintext, &mut out)?,
            Cipher::Secretbox(c) => {
                let nonce = random::<SECRETBOX_NONCE>()?;
                let sealed = c
                    .encrypt(&nonce.into(), plaintext)
                    .map_err(|_| EncryptionError::Seal(self.kind.name()))?;
                out.extend_from_slice(&nonce);
                out.extend_from_slice(&sealed);
            }
        }
        Ok(out)
    }

    /// The plaintext of a value this provider wrote (see [`Provider::wrote`])
    /// for storage key `key`; a wrong key or tampered data is an error.
    pub(crate) fn decrypt(&self, stored: &[u8], key: &str) -> Result<Vec<u8>, EncryptionError> {
        let refused = |why: &'static str| EncryptionError::Open {
            provider: self.kind.name(),
            key: self.key_name.clone(),
            why,
        };
        if matches!(self.cipher, Cipher::Identity) && stored.starts_with(ENCRYPTED_PREFIX) {
            return Err(refused("identity cannot read an encrypted value"));
        }
        let body = stored
            .strip_prefix(self.prefix.as_slice())
            .ok_or_else(|| refused("the value was written by another provider or key"))?;
        let opened = match &self.cipher {
            Cipher::Identity => Some(body.to_vec()),
            Cipher::Gcm128(c) => open_gcm(c.as_ref(), body, key),
            Cipher::Gcm192(c) => open_gcm(c.as_ref(), body, key),
            Cipher::Gcm256(c) => open_gcm(c.as_ref(), body, key),
            Cipher::Cbc128(c) => open_cbc::<aes::Aes128>(c.as_ref(), body),
            Cipher::Cbc192(c) => open_cbc::<aes::Aes192>(c.as_ref(), body),
            Cipher::Cbc256(c) => open_cbc::<aes::Aes256>(c.as_ref(), body),
            Cipher::Secretbox(c) => {
                if body.len() < SECRETBOX_NONCE {
                    return Err(refused("the value is too short"));
                }
                let (nonce, sealed) = body.split_at(SECRETBOX_NONCE);
                c.decrypt(nonce.into(), sealed).ok()
            }
        };
        opened.ok_or_else(|| refused("the key does not open it (wrong key or damaged value)"))
    }
}

/// `N` bytes from the operating system's random source.
fn random<const N: usize>() -> Result<[u8; N], EncryptionError> {
    let mut bytes = [0u8; N];
    OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| EncryptionError::Random(e.to_string()))?;
    Ok(bytes)
}

/// A fresh random key of `length` bytes.
pub(super) fn generate_key(length: usize) -> Result<Vec<u8>, EncryptionError> {
    let mut key = vec![0u8; length];
    OsRng
        .try_fill_bytes(&mut key)
        .map_err(|e| EncryptionError::Random(e.to_string()))?;
    Ok(key)
}

fn seal_gcm<C: Aead>(
    cipher: &C,
    plaintext: &[u8],
    key: &str,
    out: &mut Vec<u8>,
) -> Result<(), EncryptionError> {
    let nonce = random::<GCM_NONCE>()?;
    // The storage key is authenticated, so a value copied under another
    // key does not decrypt there.
    let sealed = cipher
        .encrypt(
            aes_gcm::Nonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: key.as_bytes(),
            },
        )
        .map_err(|_| EncryptionError::Seal("aesgcm"))?;
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(())
}

fn open_gcm<C: Aead>(cipher: &C, body: &[u8], key: &str) -> Option<Vec<u8>> {
    if body.len() < GCM_NONCE {
        return None;
    }
    let (nonce, sealed) = body.split_at(GCM_NONCE);
    cipher
        .decrypt(
            aes_gcm::Nonce::from_slice(nonce),
            Payload {
                msg: sealed,
                aad: key.as_bytes(),
            },
        )
        .ok()
}

fn seal_cbc<C>(cipher: &C, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), EncryptionError>
where
    C: Clone + cbc::cipher::BlockCipher + cbc::cipher::BlockEncryptMut,
{
    let iv = random::<AES_BLOCK>()?;
    let encryptor = cbc::Encryptor::<C>::inner_iv_slice_init(cipher.clone(), &iv)
        .map_err(|_| EncryptionError::Seal("aescbc"))?;
    out.extend_from_slice(&iv);
    out.extend_from_slice(&encryptor.encrypt_padded_vec_mut::<Pkcs7>(plaintext));
    Ok(())
}

fn open_cbc<C>(cipher: &C, body: &[u8]) -> Option<Vec<u8>>
where
    C: Clone + cbc::cipher::BlockCipher + cbc::cipher::BlockDecryptMut,
{
    if body.len() < 2 * AES_BLOCK || !body.len().is_multiple_of(AES_BLOCK) {
        return None;
    }
    let (iv, sealed) = body.split_at(AES_BLOCK);
    cbc::Decryptor::<C>::inner_iv_slice_init(cipher.clone(), iv)
        .ok()?
        .decrypt_padded_vec_mut::<Pkcs7>(sealed)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "/registry/core/secrets/default/s";

    fn all() -> Vec<Provider> {
        let mut providers = vec![Provider::identity()];
        for (kind, sizes) in [
            (ProviderKind::AesGcm, &[16usize, 24, 32][..]),
            (ProviderKind::AesCbc, &[16, 24, 32][..]),
            (ProviderKind::Secretbox, &[32][..]),
        ] {
            for size in sizes {
                let secret = generate_key(*size).unwrap();
                providers.push(Provider::keyed(kind, "k1", &secret).unwrap());
            }
        }
        providers
    }

    #[test]
    fn every_provider_round_trips_with_upstreams_prefix() {
        let plaintext = br#"{"data":{"password":"aHVudGVyMg=="}}"#;
        for provider in all() {
            let stored = provider.encrypt(plaintext, KEY).unwrap();
            assert!(provider.wrote(&stored), "{provider:?}");
            assert_eq!(
                provider.decrypt(&stored, KEY).unwrap(),
                plaintext,
                "{provider:?}"
            );
            if provider.kind() == ProviderKind::Identity {
                assert_eq!(stored, plaintext);
                continue;
            }
            let prefix = format!("k8s:enc:{}:v1:k1:", provider.kind().name());
            assert!(stored.starts_with(prefix.as_bytes()), "{provider:?}");
            let body = &stored[prefix.len()..];
            assert!(
                !body
                    .windows(8)
                    .any(|w| w == b"password" || w == b"aHVudGVy"),
                "{provider:?} leaks the plaintext"
            );
            // A fresh nonce or IV each time: equal plaintexts differ on disk.
            assert_ne!(provider.encrypt(plaintext, KEY).unwrap(), stored);
        }
    }

    #[test]
    fn a_wrong_key_or_a_tampered_value_does_not_open() {
        for kind in [
            ProviderKind::AesGcm,
            ProviderKind::AesCbc,
            ProviderKind::Secretbox,
        ] {
            let right = Provider::keyed(kind, "k1", &generate_key(32).unwrap()).unwrap();
            // Same name, other key material: the prefix matches, the key does not.
            let wrong = Provider::keyed(kind, "k1", &generate_key(32).unwrap()).unwrap();
            let stored = right.encrypt(b"top secret value!", KEY).unwrap();
            let opened = wrong.decrypt(&stored, KEY);
            // CBC without a MAC can "succeed" only with garbage that is not
            // the plaintext; authenticated providers must refuse outright.
            match kind {
                ProviderKind::AesCbc => {
                    assert!(opened.map_or(true, |p| p != b"top secret value!"));
                }
                _ => assert!(opened.is_err(), "{kind:?}"),
            }
            let mut tampered = stored.clone();
            let last = tampered.len() - 1;
            tampered[last] ^= 1;
            if kind != ProviderKind::AesCbc {
                assert!(right.decrypt(&tampered, KEY).is_err(), "{kind:?}");
            }
            let other_name = Provider::keyed(kind, "k2", &generate_key(32).unwrap()).unwrap();
            assert!(!other_name.wrote(&stored));
            assert!(other_name.decrypt(&stored, KEY).is_err());
        }
    }

    #[test]
    fn aes_gcm_binds_the_value_to_its_storage_key() {
        let gcm = Provider::keyed(ProviderKind::AesGcm, "k", &generate_key(32).unwrap()).unwrap();
        let stored = gcm.encrypt(b"v", KEY).unwrap();
        assert!(
            gcm.decrypt(&stored, "/registry/core/secrets/default/other")
                .is_err()
        );
    }

    #[test]
    fn identity_never_hands_out_ciphertext() {
        let cbc = Provider::keyed(ProviderKind::AesCbc, "k", &generate_key(32).unwrap()).unwrap();
        let stored = cbc.encrypt(b"v", KEY).unwrap();
        assert!(!Provider::identity().wrote(&stored));
        assert!(Provider::identity().decrypt(&stored, KEY).is_err());
    }

    #[test]
    fn keys_of_the_wrong_length_are_refused_and_never_printed() {
        for (kind, length) in [
            (ProviderKind::AesGcm, 20),
            (ProviderKind::AesCbc, 8),
            (ProviderKind::Secretbox, 16),
        ] {
            let secret = vec![0x41u8; length];
            let err = Provider::keyed(kind, "k", &secret).unwrap_err().to_string();
            assert!(err.contains(&length.to_string()), "{err}");
            assert!(!err.contains("AAAA"), "{err}");
        }
        let provider = Provider::keyed(ProviderKind::AesCbc, "k", &[0x41; 32]).unwrap();
        assert!(!format!("{provider:?}").contains("AAAA"));
    }
}
