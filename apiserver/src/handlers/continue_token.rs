//! A paginated list's `continue` token: where the next page resumes and at
//! which state of the store. A token names the revision of the first page,
//! so every page shows the collection as it was then; it stays good until
//! compaction drops that revision from the store's history, as upstream's
//! does. Past that, upstream answers 410 with a second token that resumes
//! after the same key at the newest state (an inconsistent continuation the
//! client may choose to follow); its revision is `-1`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use skiff_store::Revision;

use crate::status::ApiError;

/// The only version of the token's encoding, as upstream names it.
const VERSION: &str = "meta.k8s.io/v1";

/// Where a continued list resumes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct ContinueToken {
    v: String,
    /// The first page's revision; negative for "the newest state".
    rv: i64,
    /// The last key the previous page held.
    pub start: String,
}

/// The state a continued page is read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadAt {
    /// The first page's revision, so the pages fit together.
    Revision(Revision),
    /// Whatever is newest: the continuation of a token whose revision was
    /// compacted away.
    Newest,
}

impl ContinueToken {
    /// The token for the page after `last_key`, at `revision`.
    pub(super) fn encode(revision: Revision, last_key: &str) -> String {
        Self::with_rv(i64::try_from(revision).unwrap_or(i64::MAX), last_key)
    }

    fn with_rv(rv: i64, start: &str) -> String {
        let token = ContinueToken {
            v: VERSION.into(),
            rv,
            start: start.to_string(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
    }

    /// Reads a token a client sent back, with upstream's refusal of one that
    /// is not a token or names no revision.
    pub(super) fn decode(token: &str) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::BadRequest(format!(
                "continue key is not valid: incorrect encoded start resourceVersion (version {VERSION})"
            ))
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| bad())?;
        let token: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if token.v != VERSION {
            return Err(ApiError::BadRequest(format!(
                "continue key is not valid: server does not recognize this encoded version {:?}",
                token.v
            )));
        }
        if token.rv == 0 {
            return Err(bad());
        }
        Ok(token)
    }

    /// The state this token's page is read at.
    pub(super) fn read_at(&self) -> ReadAt {
        match Revision::try_from(self.rv) {
            Ok(revision) => ReadAt::Revision(revision),
            Err(_) => ReadAt::Newest,
        }
    }

    /// Upstream's 410 for a token whose revision is compacted away, holding
    /// the token that resumes after the same key at the newest state.
    pub(super) fn expired(&self) -> ApiError {
        ApiError::ContinueExpired {
            resume: Self::with_rv(-1, &self.start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_its_revision_and_key() {
        let token = ContinueToken::decode(&ContinueToken::encode(42, "/registry/a/b")).unwrap();
        assert_eq!(token.read_at(), ReadAt::Revision(42));
        assert_eq!(token.start, "/registry/a/b");
    }

    #[test]
    fn the_expired_answer_resumes_at_the_newest_state() {
        let token = ContinueToken::decode(&ContinueToken::encode(7, "/registry/k")).unwrap();
        let ApiError::ContinueExpired { resume } = token.expired() else {
            panic!("not a ContinueExpired")
        };
        let resumed = ContinueToken::decode(&resume).unwrap();
        assert_eq!(resumed.read_at(), ReadAt::Newest);
        assert_eq!(resumed.start, "/registry/k");
    }

    #[test]
    fn tokens_without_a_revision_or_in_another_version_are_refused() {
        for token in [
            "garbage".to_string(),
            ContinueToken::with_rv(0, "/registry/k"),
            URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v2","rv":3,"start":"/k"}"#),
        ] {
            let err = ContinueToken::decode(&token).unwrap_err();
            assert_eq!(err.code(), http::StatusCode::BAD_REQUEST, "{token}");
            assert!(
                err.to_string().contains("continue key is not valid"),
                "{err}"
            );
        }
    }
}
