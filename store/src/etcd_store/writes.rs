//! Creates, updates and deletes as single etcd transactions: the condition
//! and the write are one atomic step in etcd, so concurrent writers from any
//! server see exactly one winner, and a refused write takes no revision (a
//! transaction whose taken branch only reads does not advance etcd's).

use bytes::Bytes;
use etcd_client::{
    Compare, CompareOp, DeleteOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use super::Inner;
use super::convert::{self, wire};
use crate::{KeyValue, Revision, StoreError};

/// The revision of a successful write: its response header's.
fn written_at(inner: &Inner, response: &etcd_client::TxnResponse) -> Result<Revision, StoreError> {
    let header = response
        .header()
        .ok_or_else(|| missing("a response header"))?;
    let revision = convert::revision(header.revision());
    inner.tracker.saw(revision);
    Ok(revision)
}

fn missing(what: &str) -> StoreError {
    StoreError::Corrupt {
        what: "an etcd transaction response".into(),
        detail: format!("{what} is missing"),
    }
}

pub(crate) async fn create(inner: &Inner, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, value.to_vec(), None)]);
    let response = inner.txn("creating a key in etcd", txn).await?;
    inner.tracker.saw_header(response.header());
    if !response.succeeded() {
        return Err(StoreError::AlreadyExists { key: key.into() });
    }
    let revision = written_at(inner, &response)?;
    Ok(KeyValue {
        key: key.into(),
        value,
        create_revision: revision,
        mod_revision: revision,
        version: 1,
    })
}

/// The conditions of an update or delete: the key exists (a missing key
/// compares as all zeroes in etcd) and, when asked, is at that revision.
fn conditions(key: &str, expected: Option<Revision>) -> Vec<Compare> {
    let mut compares = vec![Compare::create_revision(key, CompareOp::Greater, 0)];
    if let Some(expected) = expected {
        compares.push(Compare::mod_revision(key, CompareOp::Equal, wire(expected)));
    }
    compares
}

/// Why a conditional write was refused, from the key as the same
/// transaction read it.
fn refusal(
    key: &str,
    expected: Option<Revision>,
    response: &etcd_client::TxnResponse,
) -> Result<StoreError, StoreError> {
    let current = response
        .op_responses()
        .into_iter()
        .find_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        })
        .ok_or_else(|| missing("the read of the refused key"))?;
    Ok(match (current.kvs().first(), expected) {
        (None, _) => StoreError::NotFound { key: key.into() },
        (Some(kv), Some(expected)) => StoreError::Conflict {
            key: key.into(),
            expected,
            actual: convert::revision(kv.mod_revision()),
        },
        // Present, and no revision expected: only possible when the key
        // was created between the compare and the read, which one
        // transaction rules out.
        (Some(_), None) => return Err(missing("the reason the write was refused")),
    })
}

pub(crate) async fn update(
    inner: &Inner,
    key: &str,
    value: Bytes,
    expected: Option<Revision>,
) -> Result<KeyValue, StoreError> {
    let put = TxnOp::put(key, value.to_vec(), Some(PutOptions::new().with_prev_key()));
    let (response, revision) = guarded(inner, "updating a key in etcd", key, expected, put).await?;
    let prev = response
        .op_responses()
        .into_iter()
        .find_map(|op| match op {
            TxnOpResponse::Put(put) => put.prev_key().cloned(),
            _ => None,
        })
        .ok_or_else(|| missing("the previous value of the updated key"))?;
    Ok(KeyValue {
        key: key.into(),
        value,
        create_revision: convert::revision(prev.create_revision()),
        mod_revision: revision,
        version: u64::try_from(prev.version()).unwrap_or(0) + 1,
    })
}

pub(crate) async fn delete(
    inner: &Inner,
    key: &str,
    expected: Option<Revision>,
) -> Result<KeyValue, StoreError> {
    let delete = TxnOp::delete(key, Some(DeleteOptions::new().with_prev_key()));
    let (response, revision) =
        guarded(inner, "deleting a key in etcd", key, expected, delete).await?;
    let prev = response
        .op_responses()
        .into_iter()
        .find_map(|op| match op {
            TxnOpResponse::Delete(delete) => delete.prev_kvs().first().cloned(),
            _ => None,
        })
        .ok_or_else(|| missing("the value of the deleted key"))?;
    // As the trait says: the value removed, at the deletion's revision.
    Ok(KeyValue {
        mod_revision: revision,
        ..convert::key_value(&prev)?
    })
}

/// Runs `op` on `key` only if it exists (at `expected`, when given), as one
/// transaction that reads the key back otherwise, so a refusal says why.
/// Returns the response and the revision of the write.
async fn guarded(
    inner: &Inner,
    what: &'static str,
    key: &str,
    expected: Option<Revision>,
    op: TxnOp,
) -> Result<(TxnResponse, Revision), StoreError> {
    let txn = Txn::new()
        .when(conditions(key, expected))
        .and_then([op])
        .or_else([TxnOp::get(key, None)]);
    let response = inner.txn(what, txn).await?;
    inner.tracker.saw_header(response.header());
    if !response.succeeded() {
        return Err(refusal(key, expected, &response)?);
    }
    let revision = written_at(inner, &response)?;
    Ok((response, revision))
}
