//! LimitRanger, as upstream's admission plugin: the namespace's
//! LimitRanges give new pods' containers their default requests and limits
//! (recorded in the `kubernetes.io/limit-ranger` annotation), and refuse
//! pods and claims outside their minimum, maximum or limit-to-request ratio,
//! in upstream's words (`minimum cpu usage per Container is 100m, but
//! request is 50m`).
//!
//! It reads LimitRanges from their watch cache, in name order, and never
//! writes: the defaults go into the object being admitted.

mod checks;
mod defaults;

use std::sync::Arc;

use serde_json::Value;

use super::{Operation, WriteRequest, namespace_objects};
use crate::handlers::storage;
use crate::object::meta_str;
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::{ApiError, aggregate};

/// The namespace's LimitRanges, in name order.
fn limit_ranges(inner: &Inner, namespace: &str) -> Vec<Arc<Value>> {
    let mut ranges = namespace_objects(inner, "", "limitranges", namespace);
    ranges.sort_by(|a, b| meta_str(a, "name").cmp(&meta_str(b, "name")));
    ranges
}

fn is_core(info: &ResourceInfo, resource: &str) -> bool {
    info.group.is_empty() && info.resource == resource
}

/// Fills a new pod's missing container requests and limits from the
/// namespace's LimitRanges (pods only; updates cannot change resources).
pub(crate) fn default_pod(inner: &Inner, info: &ResourceInfo, pod: &mut Value) {
    if !is_core(info, "pods") {
        return;
    }
    let Some(namespace) = meta_str(pod, "namespace").map(String::from) else {
        return;
    };
    for range in limit_ranges(inner, &namespace) {
        defaults::apply(&range, pod);
    }
}

/// Refuses a pod create or resize, or a claim create or update, that a
/// LimitRange of its namespace does not allow; the first such range's
/// errors are the answer, as upstream's.
pub(crate) fn validate(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    let info = request.info;
    let resize = request.subresource == Some(crate::registry::Subresource::Resize);
    let (Some(object), None | Some(crate::registry::Subresource::Resize)) =
        (request.new, request.subresource)
    else {
        return Ok(());
    };
    let check: fn(&Value, &Value) -> Vec<String> = match request.operation {
        Operation::Create if is_core(info, "pods") => checks::pod,
        Operation::Update if resize => checks::pod,
        Operation::Create | Operation::Update if is_core(info, "persistentvolumeclaims") => {
            checks::claim
        }
        _ => return Ok(()),
    };
    let Some(namespace) = meta_str(object, "namespace") else {
        return Ok(());
    };
    for range in limit_ranges(inner, namespace) {
        let errors = check(&range, object);
        if !errors.is_empty() {
            return Err(storage::forbidden(
                info,
                meta_str(object, "name").unwrap_or(""),
                aggregate(&errors),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_aggregate_as_upstreams() {
        assert_eq!(aggregate(&["a"]), "a");
        assert_eq!(aggregate(&["a", "b", "a"]), "[a, b]");
    }
}
