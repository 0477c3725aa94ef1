//! Between etcd's wire types and the store's: key-values, key ranges and
//! errors.

use bytes::Bytes;

use crate::{KeyValue, Revision, StoreError};

/// An etcd revision (an `i64` on the wire, never negative) as ours.
pub(crate) fn revision(raw: i64) -> Revision {
    u64::try_from(raw).unwrap_or(0)
}

/// Our revision as etcd's; revisions beyond `i64::MAX` do not occur, and
/// saturate rather than wrap if a caller makes one up.
pub(crate) fn wire(revision: Revision) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

/// The key of an etcd key-value as a string; keys this store wrote always
/// are, a non-UTF-8 key written by someone else is reported, not guessed.
pub(crate) fn key(raw: &[u8]) -> Result<String, StoreError> {
    String::from_utf8(raw.to_vec()).map_err(|e| StoreError::Corrupt {
        what: format!("etcd key {:?}", String::from_utf8_lossy(raw)),
        detail: format!("not UTF-8: {e}"),
    })
}

/// An etcd key-value as the store's.
pub(crate) fn key_value(kv: &etcd_client::KeyValue) -> Result<KeyValue, StoreError> {
    Ok(KeyValue {
        key: key(kv.key())?,
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: revision(kv.create_revision()),
        mod_revision: revision(kv.mod_revision()),
        version: u64::try_from(kv.version()).unwrap_or(0),
    })
}

/// The first key after every key that starts with `prefix` (etcd's range
/// end for a prefix); `[0]` (etcd: "to the end") when there is none.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The `[start, end)` range of keys under `prefix`, strictly after
/// `start_after` when given; `None` when it is empty.
pub(crate) fn list_range(prefix: &str, start_after: Option<&str>) -> Option<(Vec<u8>, Vec<u8>)> {
    let end = prefix_end(prefix.as_bytes());
    let mut start = match start_after {
        Some(after) if after >= prefix => {
            // The smallest key greater than `after`.
            let mut key = after.as_bytes().to_vec();
            key.push(0);
            key
        }
        _ => prefix.as_bytes().to_vec(),
    };
    if start.is_empty() {
        // etcd needs a key; "\0" is the smallest one.
        start.push(0);
    }
    if end != [0] && start >= end {
        return None;
    }
    Some((start, end))
}

/// A failed etcd call, told as etcd's status code and message (the client's
/// own text repeats its transport internals).
#[derive(Debug, thiserror::Error)]
#[error("{summary}")]
pub(crate) struct EtcdFailure {
    summary: String,
    #[source]
    source: etcd_client::Error,
}

impl From<etcd_client::Error> for EtcdFailure {
    fn from(source: etcd_client::Error) -> Self {
        let summary = match &source {
            etcd_client::Error::GRpcStatus(status) => {
                format!("etcd answered {:?}: {}", status.code(), status.message())
            }
            other => other.to_string(),
        };
        Self { summary, source }
    }
}

/// What a failed etcd call means for the store.
pub(crate) fn error(context: &'static str, e: etcd_client::Error) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(EtcdFailure::from(e)),
    }
}

/// Whether etcd refused a read or watch because the revision asked for
/// was compacted (`mvcc: required revision has been compacted`).
pub(crate) fn is_compacted(e: &etcd_client::Error) -> bool {
    status_says(e, "required revision has been compacted")
}

/// Whether etcd refused a write because its NOSPACE alarm is raised
/// (`mvcc: database space exceeded`).
pub(crate) fn is_no_space(e: &etcd_client::Error) -> bool {
    status_says(e, "database space exceeded")
}

/// Whether a failed call may be sent again: any unavailable member for an
/// idempotent request, else only a connection that was never made (so the
/// request never left).
pub(crate) fn worth_retrying(e: &etcd_client::Error, idempotent: bool) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(status) if status.code() == tonic::Code::Unavailable => {
            idempotent || status.message().contains("connect error")
        }
        _ => false,
    }
}

/// etcd's errors reach clients only as gRPC statuses with fixed messages
/// (its own Go client matches them the same way).
fn status_says(e: &etcd_client::Error, text: &str) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(status) if status.message().contains(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_increment_the_last_byte_that_can_be() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b""), [0]);
        assert_eq!(prefix_end(b"\xff\xff"), [0]);
    }

    #[test]
    fn list_ranges_start_after_the_given_key_within_the_prefix() {
        assert_eq!(
            list_range("a/", None),
            Some((b"a/".to_vec(), b"a0".to_vec()))
        );
        assert_eq!(
            list_range("a/", Some("a/05")),
            Some((b"a/05\0".to_vec(), b"a0".to_vec()))
        );
        // A start before the prefix starts at the prefix.
        assert_eq!(
            list_range("a/", Some("a")),
            Some((b"a/".to_vec(), b"a0".to_vec()))
        );
        assert_eq!(list_range("a/", Some("b")), None);
        assert_eq!(list_range("", None), Some((vec![0], vec![0])));
        assert_eq!(list_range("", Some("z")), Some((b"z\0".to_vec(), vec![0])));
    }

    #[test]
    fn only_requests_that_never_left_are_written_again() {
        let status = |s| etcd_client::Error::GRpcStatus(s);
        let refused = status(tonic::Status::unavailable("tcp connect error"));
        assert!(worth_retrying(&refused, false) && worth_retrying(&refused, true));
        let cut = status(tonic::Status::unavailable("h2 protocol error"));
        assert!(!worth_retrying(&cut, false) && worth_retrying(&cut, true));
        let compacted = status(tonic::Status::out_of_range(
            "etcdserver: mvcc: required revision has been compacted",
        ));
        assert!(!worth_retrying(&compacted, true));
        assert!(is_compacted(&compacted) && !is_no_space(&compacted));
    }
}
