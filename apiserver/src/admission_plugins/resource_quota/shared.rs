//! ResourceQuota on a store several API servers share
//! (`ApiServerConfig::shared_store`): each server's ledger sees only the
//! writes it admitted itself, so there a charge is also made durable, as
//! upstream makes every charge: `status.used` of each quota that counts the
//! write is raised by compare-and-swap on the quota's revision before the
//! write is stored, and checked against what the status records. Two servers charging one quota at once conflict, and
//! the one that lost reads the other's charge before it checks again. The
//! quota controller later sets `status.used` to what the stored objects use
//! (so a charge whose write then failed is given back there).

use skiff_common::quota::{
    QuotaSpec, ResourceList, add, exceeded, list_to_json, mask, pretty, read_list,
};

use crate::admission_plugins::WriteRequest;
use crate::handlers::storage::{self, WriteError};
use crate::object::{meta_str, set_field};
use crate::server::Inner;
use crate::status::ApiError;

/// Rounds of read, check and compare-and-swap on one quota before giving up.
const ATTEMPTS: usize = 16;

/// One quota's part of an admitted write's charge.
#[derive(Debug, Clone)]
pub(crate) struct SharedCharge {
    /// The quota's name.
    pub quota: String,
    /// What the stored objects use as this server's caches show them (its
    /// own writes in flight not included): the starting point when the
    /// quota's status records nothing yet for a name.
    pub live: ResourceList,
    /// What the write adds.
    pub requested: ResourceList,
}

/// Raises each quota's `status.used` by its charge, refusing (upstream's
/// `exceeded quota` 403) when what the status already records plus the
/// charge is over a hard limit.
pub(crate) async fn reserve(
    inner: &Inner,
    request: &WriteRequest<'_>,
    namespace: &str,
    charges: &[SharedCharge],
) -> Result<(), ApiError> {
    let Some(info) = inner.registry.get("", "v1", "resourcequotas") else {
        return Ok(());
    };
    let name = request.new.and_then(|o| meta_str(o, "name")).unwrap_or("");
    let refuse = |detail: String| storage::forbidden(request.info, name, detail);
    for charge in charges {
        let key = info.key(Some(namespace), &charge.quota);
        let mut charged = false;
        for _ in 0..ATTEMPTS {
            // A quota deleted meanwhile limits nothing.
            let Some((mut quota, revision)) = storage::read(inner, &info, &key).await? else {
                charged = true;
                break;
            };
            let hard = QuotaSpec::of(&quota).hard;
            let recorded = read_list(&quota["status"]["used"]);
            let names: Vec<&str> = charge.requested.keys().map(String::as_str).collect();
            // Every server's charges go through the status, so it is the
            // count; where it records nothing yet (no controller report and
            // no charge so far), what the stored objects use. Two servers
            // seeding it at once conflict, and the loser reads the seed.
            let mut used = charge.live.clone();
            used.extend(mask(&recorded, names.iter().copied()));
            let after = add(&used, &charge.requested);
            let over = exceeded(&after, &hard);
            if !over.is_empty() {
                let pick =
                    |list: &ResourceList| pretty(&mask(list, over.iter().map(String::as_str)));
                return Err(refuse(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    charge.quota,
                    pick(&charge.requested),
                    pick(&used),
                    pick(&hard),
                )));
            }
            let mut status_used = recorded;
            status_used.extend(after);
            if let Some(status) = quota.get_mut("status").filter(|s| s.is_object()) {
                set_field(status, "used", list_to_json(&status_used));
            } else {
                set_field(
                    &mut quota,
                    "status",
                    serde_json::json!({ "used": list_to_json(&status_used) }),
                );
            }
            match storage::update(inner, &info, &key, quota, revision).await {
                Ok(_) => {
                    charged = true;
                    break;
                }
                Err(WriteError::Conflict) => continue,
                Err(WriteError::Api(e)) => return Err(e),
            }
        }
        if !charged {
            return Err(ApiError::ServiceUnavailable(format!(
                "could not charge quota {}: it kept changing",
                charge.quota
            )));
        }
    }
    Ok(())
}
