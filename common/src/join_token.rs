//! The text forms of the credentials an agent joins with, shared by the
//! server (which writes and checks them) and the agent (which reads them):
//!
//! - the *join token*, k3s's `K10<sha256 hex of the cluster CA>::<credential>`:
//!   the hash lets the agent check the CA it is shown before it trusts it
//!   or sends the credential anywhere;
//! - the server token's credential `server:<secret>`;
//! - a bootstrap token `<id>.<secret>` (upstream's `[a-z0-9]{6}.[a-z0-9]{16}`).
//!
//! Only parsing and formatting live here: no I/O, no cluster logic.

use sha2::{Digest, Sha256};

/// The prefix of a join token that carries the CA hash.
pub const PREFIX: &str = "K10";

/// The user part of the server token's credential.
pub const SERVER_USER: &str = "server";

/// Why a token could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// `K10…` without the `::` between the hash and the credential, or a
    /// hash that is not 64 hex digits.
    #[error("the join token is malformed: expected K10<sha256 hex of the CA>::<credential>")]
    Malformed,
    /// The credential part is empty.
    #[error("the join token has no credential after '::'")]
    NoCredential,
}

/// A token as `--token` gives it.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// The sha256 (lower-case hex) the cluster CA must have, when the
    /// token carries one (`K10…` form).
    pub ca_hash: Option<String>,
    /// What authenticates: `server:<secret>`, `<id>.<secret>` or any other
    /// bearer token.
    pub credential: String,
}

impl std::fmt::Debug for JoinToken {
    // The credential is a secret: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinToken")
            .field("ca_hash", &self.ca_hash)
            .finish_non_exhaustive()
    }
}

impl JoinToken {
    /// Reads `K10<hash>::<credential>`, or takes any other text as a bare
    /// credential without a CA hash.
    pub fn parse(text: &str) -> Result<Self, TokenError> {
        let text = text.trim();
        let Some(rest) = text.strip_prefix(PREFIX) else {
            return Ok(Self {
                ca_hash: None,
                credential: text.to_string(),
            });
        };
        let (hash, credential) = rest.split_once("::").ok_or(TokenError::Malformed)?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(TokenError::Malformed);
        }
        if credential.is_empty() {
            return Err(TokenError::NoCredential);
        }
        Ok(Self {
            ca_hash: Some(hash.to_ascii_lowercase()),
            credential: credential.to_string(),
        })
    }

    /// The full `K10<hash>::<credential>` text.
    pub fn format(ca_pem: &[u8], credential: &str) -> String {
        format!("{PREFIX}{}::{credential}", ca_hash(ca_pem))
    }

    /// Whether `ca_pem` (the bytes the server served) is the CA this token
    /// names; a token without a hash names none.
    pub fn matches_ca(&self, ca_pem: &[u8]) -> bool {
        self.ca_hash.as_deref() == Some(ca_hash(ca_pem).as_str())
    }
}

/// The sha256 of the CA bundle's bytes, lower-case hex (what k3s puts in
/// its tokens).
pub fn ca_hash(ca_pem: &[u8]) -> String {
    Sha256::digest(ca_pem)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The server token's credential for `secret`.
pub fn server_credential(secret: &str) -> String {
    format!("{SERVER_USER}:{secret}")
}

/// The secret of a `server:<secret>` credential.
pub fn server_secret(credential: &str) -> Option<&str> {
    credential
        .strip_prefix(SERVER_USER)
        .and_then(|r| r.strip_prefix(':'))
        .filter(|s| !s.is_empty())
}

/// The id and secret of a bootstrap token `<id>.<secret>` (`[a-z0-9]{6}` and
/// `[a-z0-9]{16}`), upstream's only form.
pub fn bootstrap_parts(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k10_tokens_carry_the_ca_hash() {
        let token = JoinToken::format(b"CA PEM", "server:s3cret");
        assert!(token.starts_with("K10"));
        let parsed = JoinToken::parse(&token).unwrap();
        assert_eq!(parsed.credential, "server:s3cret");
        assert!(parsed.matches_ca(b"CA PEM"));
        assert!(!parsed.matches_ca(b"another CA"));
        assert_eq!(server_secret(&parsed.credential), Some("s3cret"));
    }

    #[test]
    fn bare_tokens_have_no_hash_and_never_match_a_ca() {
        let parsed = JoinToken::parse("abcdef.0123456789abcdef").unwrap();
        assert_eq!(parsed.ca_hash, None);
        assert!(!parsed.matches_ca(b"CA PEM"));
        assert_eq!(
            bootstrap_parts(&parsed.credential),
            Some(("abcdef", "0123456789abcdef"))
        );
    }

    #[test]
    fn malformed_tokens_are_refused() {
        assert_eq!(JoinToken::parse("K10abc::x"), Err(TokenError::Malformed));
        assert_eq!(
            JoinToken::parse(&format!("K10{}", "a".repeat(64))),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            JoinToken::parse(&format!("K10{}::", "a".repeat(64))),
            Err(TokenError::NoCredential)
        );
    }

    #[test]
    fn only_upstreams_bootstrap_form_is_a_bootstrap_token() {
        for bad in [
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde",
            "abcdef0123456789abcdef",
            "server:x",
        ] {
            assert_eq!(bootstrap_parts(bad), None, "{bad}");
        }
        assert_eq!(server_secret("server:"), None);
        assert_eq!(server_secret("serverx"), None);
    }
}
