//! The namespace controller: a namespace being deleted (deletionTimestamp set,
//! phase Terminating, `kubernetes` still in spec.finalizers) has all its
//! content deleted; its status conditions say how far that got; once empty
//! the `kubernetes` finalizer is removed through `namespaces/{name}/finalize`
//! and the API server lets the namespace go.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiCapabilities, verbs};
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Controller, EnqueueKeys, ObjectKey, WorkQueue};

use crate::controller_utils::api_message;
use crate::garbage_collector::discovery::{ApiResources, group_resource};
use crate::manager::{Context, Stop, stopped};
use kube::discovery::ApiResource;

/// The finalizer the namespace controller owns.
pub(crate) const FINALIZER: &str = "kubernetes";

/// How soon a namespace with content left (pods in their grace period,
/// finalizers) is looked at again.
const RECHECK: Duration = Duration::from_secs(2);

/// Errors of one namespace's cleanup.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceError {
    /// The namespace's status or finalizers could not be written.
    #[error("namespace {name}: {action}: {source}")]
    Api {
        /// The namespace.
        name: String,
        /// The step that failed, e.g. "finalizing".
        action: &'static str,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// Runs the namespace controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let informer = ctx.factory.informer::<Namespace>();
    let queue = WorkQueue::<ObjectKey>::new();
    let cache = informer.cache().clone();
    let client = ctx.client.clone();
    Controller::new("namespace", queue.clone())
        .workers(2)
        .watch(&informer, EnqueueKeys::new(queue))
        .run_until(
            move |key: ObjectKey| {
                let ns = cache.get("", &key.name);
                let client = client.clone();
                async move {
                    match ns {
                        Some(ns) => sync(&client, &ns).await,
                        None => Ok(Action::Done),
                    }
                }
            },
            stopped(stop),
        )
        .await;
}

/// One pass over a namespace: nothing unless it is being deleted.
async fn sync(client: &kube::Client, ns: &Namespace) -> Result<Action, NamespaceError> {
    let name = ns.name_any();
    if ns.metadata.deletion_timestamp.is_none() || !holds_finalizer(ns) {
        return Ok(Action::Done);
    }
    let report = match ApiResources::discover(client).await {
        Ok(resources) => delete_content(client, &name, &resources).await,
        Err(error) => CleanupReport {
            discovery_error: Some(error.to_string()),
            ..Default::default()
        },
    };
    write_conditions(client, ns, &report).await?;
    if !report.is_done() {
        return Ok(Action::RequeueAfter(RECHECK));
    }
    finalize(client, ns).await?;
    Ok(Action::Done)
}

fn holds_finalizer(ns: &Namespace) -> bool {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// What a cleanup pass found: errors, and what is still there.
#[derive(Debug, Default, Clone, PartialEq)]
struct CleanupReport {
    discovery_error: Option<String>,
    /// Deletion failures, as "group resource: error".
    failures: Vec<String>,
    /// Objects left per resource, named `resource.group` as upstream's
    /// messages do (`pods.` for the core group).
    remaining: BTreeMap<String, usize>,
    /// Objects left per finalizer they still carry.
    finalizers: BTreeMap<String, usize>,
}

impl CleanupReport {
    fn is_done(&self) -> bool {
        self.discovery_error.is_none() && self.failures.is_empty() && self.remaining.is_empty()
    }
}

/// Deletes every object of every namespaced resource in `namespace`, then
/// counts what is left.
async fn delete_content(
    client: &kube::Client,
    namespace: &str,
    resources: &ApiResources,
) -> CleanupReport {
    let mut report = CleanupReport::default();
    for (ar, caps) in resources.namespaced_deletable() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let gr = group_resource(&ar);
        let left = match delete_all(&api, &caps).await {
            Ok(left) => left,
            Err(error) => {
                report
                    .failures
                    .push(format!("{gr}: {}", api_message(&error)));
                continue;
            }
        };
        if left.is_empty() {
            continue;
        }
        report.remaining.insert(resource_dot_group(&ar), left.len());
        for obj in &left {
            for finalizer in obj.finalizers() {
                *report.finalizers.entry(finalizer.clone()).or_default() += 1;
            }
        }
    }
    report
}

/// `resource.group`, the way upstream's namespace conditions name a
/// resource (the core group leaves a bare trailing dot: `pods.`).
fn resource_dot_group(ar: &ApiResource) -> String {
    format!("{}.{}", ar.plural, ar.group)
}

/// Deletes everything `api` lists; returns what is still there afterwards.
async fn delete_all(
    api: &Api<DynamicObject>,
    caps: &ApiCapabilities,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let listed = api.list(&ListParams::default()).await?.items;
    let live: Vec<&DynamicObject> = listed
        .iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .collect();
    if !live.is_empty() {
        if caps.supports_operation(verbs::DELETE_COLLECTION) {
            api.delete_collection(&DeleteParams::default(), &ListParams::default())
                .await?;
        } else {
            for obj in live {
                match api.delete(&obj.name_any(), &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }
    if listed.is_empty() {
        return Ok(listed);
    }
    Ok(api.list(&ListParams::default()).await?.items)
}

/// One deletion condition: True with the problem's reason and message when
/// there is one, else False with those saying all is well (`fine`).
fn deletion_condition(
    type_: &str,
    problem: Option<(&'static str, String)>,
    fine: (&'static str, &str),
) -> (String, bool, &'static str, String) {
    match problem {
        Some((reason, message)) => (type_.to_owned(), true, reason, message),
        None => (type_.to_owned(), false, fine.0, fine.1.to_owned()),
    }
}

/// The five deletion conditions upstream reports, from `report`.
fn conditions(report: &CleanupReport) -> Vec<(String, bool, &'static str, String)> {
    // What is left per resource or finalizer, worded and joined; None
    // when nothing is.
    let counted = |left: &BTreeMap<String, usize>, wording: fn(&str, usize) -> String| {
        let parts: Vec<String> = left.iter().map(|(what, n)| wording(what, *n)).collect();
        (!left.is_empty()).then(|| parts.join(", "))
    };
    let remaining = counted(&report.remaining, |gr, n| {
        format!("{gr} has {n} resource instances")
    });
    let finalizers = counted(&report.finalizers, |f, n| {
        format!("{f} in {n} resource instances")
    });
    vec![
        deletion_condition(
            "NamespaceDeletionDiscoveryFailure",
            report.discovery_error.as_ref().map(|e| {
                let message = format!("Discovery failed for some groups, 1 failing: {e}");
                ("DiscoveryFailed", message)
            }),
            (
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
        ),
        deletion_condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            None,
            (
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
        ),
        deletion_condition(
            "NamespaceDeletionContentFailure",
            (!report.failures.is_empty()).then(|| {
                let message = format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    report.failures.len(),
                    aggregate(&report.failures)
                );
                ("ContentDeletionFailed", message)
            }),
            (
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
        ),
        deletion_condition(
            "NamespaceContentRemaining",
            remaining.map(|parts| {
                let message = format!("Some resources are remaining: {parts}");
                ("SomeResourcesRemain", message)
            }),
            ("ContentRemoved", "All content successfully removed"),
        ),
        deletion_condition(
            "NamespaceFinalizersRemaining",
            finalizers.map(|parts| {
                let message =
                    format!("Some content in the namespace has finalizers remaining: {parts}");
                ("SomeFinalizersRemain", message)
            }),
            (
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished",
            ),
        ),
    ]
}

/// Several errors as one, worded as upstream's aggregate error: a single one
/// as it is, more in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Writes the conditions through the status subresource when they changed;
/// a condition keeps its lastTransitionTime while its status stays.
async fn write_conditions(
    client: &kube::Client,
    ns: &Namespace,
    report: &CleanupReport,
) -> Result<(), NamespaceError> {
    let name = ns.name_any();
    let old = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = Time(Timestamp::now());
    let mut changed = false;
    let new: Vec<NamespaceCondition> = conditions(report)
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let status = if status { "True" } else { "False" }.to_owned();
            let previous = old.iter().find(|c| c.type_ == type_);
            let same = previous.is_some_and(|p| {
                p.status == status
                    && p.reason.as_deref() == Some(reason)
                    && p.message.as_deref() == Some(message.as_str())
            });
            changed |= !same;
            let transition = match previous {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => Some(now.clone()),
            };
            NamespaceCondition {
                type_,
                status,
                reason: Some(reason.to_owned()),
                message: Some(message),
                last_transition_time: transition,
            }
        })
        .collect();
    if !changed {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(client.clone());
    let patch = serde_json::json!({
        "status": { "phase": "Terminating", "conditions": new }
    });
    let written = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    written_or_gone(written, name, "writing status conditions")
}

/// The outcome of a write to the namespace `name` (`action`): done when it
/// succeeded or the namespace is gone already.
fn written_or_gone<T>(
    written: Result<T, kube::Error>,
    name: String,
    action: &'static str,
) -> Result<(), NamespaceError> {
    match written {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(NamespaceError::Api {
            name,
            action,
            source,
        }),
    }
}

/// Removes the `kubernetes` finalizer through the finalize subresource (an
/// update if the API lacks it).
async fn finalize(client: &kube::Client, ns: &Namespace) -> Result<(), NamespaceError> {
    let name = ns.name_any();
    let api: Api<Namespace> = Api::all(client.clone());
    let mut next = ns.clone();
    if let Some(spec) = next.spec.as_mut() {
        spec.finalizers = Some(
            spec.finalizers
                .iter()
                .flatten()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect(),
        );
    }
    let error = match api
        .replace_subresource("finalize", &name, &PostParams::default(), &next)
        .await
    {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return Err(NamespaceError::Api {
                name,
                action: "finalizing",
                source: kube::Error::Api(s),
            });
        }
        Err(error) => error,
    };
    match api.get_opt(&name).await {
        Ok(None) => return Ok(()),
        Ok(Some(_)) => {
            tracing::warn!(namespace = %name, %error, "finalize subresource failed; removing the finalizer with an update");
        }
        Err(source) => {
            return Err(NamespaceError::Api {
                name,
                action: "reading",
                source,
            });
        }
    }
    let written = api.replace(&name, &PostParams::default(), &next).await;
    written_or_gone(written, name, "removing the kubernetes finalizer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_report_remaining_content_and_finalizers() {
        let report = CleanupReport {
            remaining: [
                ("pods.".to_string(), 2),
                ("deployments.apps".to_string(), 1),
            ]
            .into(),
            finalizers: [("example.com/hold".to_string(), 1)].into(),
            ..Default::default()
        };
        let conds = conditions(&report);
        let remaining = conds
            .iter()
            .find(|c| c.0 == "NamespaceContentRemaining")
            .unwrap();
        assert!(remaining.1);
        assert_eq!(remaining.2, "SomeResourcesRemain");
        assert_eq!(
            remaining.3,
            "Some resources are remaining: deployments.apps has 1 resource instances, pods. has 2 resource instances"
        );
        let fin = conds
            .iter()
            .find(|c| c.0 == "NamespaceFinalizersRemaining")
            .unwrap();
        assert_eq!(
            fin.3,
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
        );
        assert!(!report.is_done());
    }

    #[test]
    fn an_empty_namespace_reports_every_condition_false() {
        let report = CleanupReport::default();
        assert!(report.is_done());
        let conds = conditions(&report);
        assert_eq!(conds.len(), 5);
        assert!(conds.iter().all(|c| !c.1));
        let failed = CleanupReport {
            discovery_error: Some("boom".into()),
            ..Default::default()
        };
        assert!(!failed.is_done());
        let discovery = &conditions(&failed)[0];
        assert!(discovery.1);
        assert_eq!(discovery.2, "DiscoveryFailed");
        assert_eq!(
            discovery.3,
            "Discovery failed for some groups, 1 failing: boom"
        );
    }

    #[test]
    fn failed_deletions_are_listed_as_one_aggregate() {
        let one = CleanupReport {
            failures: vec!["pods: forbidden".into()],
            ..Default::default()
        };
        let content = &conditions(&one)[2];
        assert_eq!(
            (content.0.as_str(), content.1, content.2),
            (
                "NamespaceDeletionContentFailure",
                true,
                "ContentDeletionFailed"
            )
        );
        assert_eq!(
            content.3,
            "Failed to delete all resource types, 1 remaining: pods: forbidden"
        );
        let two = CleanupReport {
            failures: vec!["pods: a".into(), "secrets: b".into()],
            ..Default::default()
        };
        assert_eq!(
            conditions(&two)[2].3,
            "Failed to delete all resource types, 2 remaining: [pods: a, secrets: b]"
        );
    }
}
