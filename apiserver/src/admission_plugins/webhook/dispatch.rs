//! Calling the matching webhooks of one write, as upstream's dispatchers
//! do. Mutating hooks run one after another on the object, each sent what
//! the previous ones made of it; a hook with `reinvocationPolicy: IfNeeded`
//! is called once more, after the first round, when a hook after it changed
//! the object. Validating hooks are all asked at once, and the first
//! refusal in configuration order answers. A hook that cannot be reached or
//! answers nonsense fails the request with a 500 under `failurePolicy:
//! Fail` and is skipped under `Ignore`; a refusal is the client's answer,
//! worded `admission webhook "<name>" denied the request: <message>`.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::matching::{self, MatchError};
use super::source::Hook;
use super::{Attributes, client, patch, review, target};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// Why a call did not produce an answer that counts (the text after
/// `failed calling webhook "<name>": `).
struct CallError(String);

/// Which call of a hook this is, as upstream's audit annotations name it:
/// the reinvocation round (0 for the first), the hook's place among the
/// configured hooks, and whether the hooks mutate.
#[derive(Debug, Clone, Copy)]
struct Place {
    round: usize,
    index: usize,
    mutating: bool,
}

impl Place {
    fn mutation(round: usize, index: usize) -> Self {
        Self {
            round,
            index,
            mutating: true,
        }
    }

    fn validation(index: usize) -> Self {
        Self {
            round: 0,
            index,
            mutating: false,
        }
    }
}

/// What calling one hook came to.
enum Outcome {
    /// Not called: no match, or a failure ignored by its policy.
    Skipped,
    /// Called; `changed` says whether its patch changed the object.
    Called { changed: bool },
}

/// Runs the mutating hooks on `object`, with one reinvocation round.
pub(super) async fn mutate(
    inner: &Inner,
    hooks: &[Hook],
    attributes: &Attributes<'_>,
    object: &mut Value,
) -> Result<(), ApiError> {
    let mut reinvoke = HashSet::new();
    let mut called_if_needed = Vec::new();
    let mut changed_any = false;
    for (index, hook) in hooks.iter().enumerate() {
        let call = HookCall::new(inner, hook, attributes);
        match call.mutating(object, Place::mutation(0, index)).await? {
            Outcome::Skipped => continue,
            Outcome::Called { changed } => {
                if changed {
                    changed_any = true;
                    reinvoke.extend(called_if_needed.drain(..));
                }
                if hook.reinvoke_if_needed {
                    called_if_needed.push(index);
                }
            }
        }
    }
    if !changed_any || reinvoke.is_empty() {
        return Ok(());
    }
    for (index, hook) in hooks.iter().enumerate() {
        if reinvoke.contains(&index) {
            let call = HookCall::new(inner, hook, attributes);
            call.mutating(object, Place::mutation(1, index)).await?;
        }
    }
    Ok(())
}

/// Asks every matching validating hook about the write; the first refusal
/// or failure (in configuration order) is the answer.
pub(super) async fn validate(
    inner: &Inner,
    hooks: &[Hook],
    attributes: &Attributes<'_>,
    object: Option<&Value>,
) -> Result<(), ApiError> {
    let calls = hooks
        .iter()
        .enumerate()
        .map(|(index, hook)| HookCall::new(inner, hook, attributes).validating(object, index));
    for result in futures::future::join_all(calls).await {
        result?;
    }
    Ok(())
}

/// One hook asked about one write: the server, the hook and the write's
/// attributes, which every step of a call reads.
#[derive(Clone, Copy)]
struct HookCall<'a> {
    inner: &'a Inner,
    hook: &'a Hook,
    attributes: &'a Attributes<'a>,
}

impl<'a> HookCall<'a> {
    fn new(inner: &'a Inner, hook: &'a Hook, attributes: &'a Attributes<'a>) -> Self {
        Self {
            inner,
            hook,
            attributes,
        }
    }

    async fn mutating(self, object: &mut Value, place: Place) -> Result<Outcome, ApiError> {
        let Some(invocation) = self.invocation(Some(object), place).await? else {
            return Ok(Outcome::Skipped);
        };
        let (hook, attributes) = (self.hook, self.attributes);
        let sent = &invocation.resource;
        let mut in_hook_version = convert(attributes.request.info, sent, object);
        let Some(verdict) = self.ask(sent, Some(&in_hook_version), place).await? else {
            return Ok(Outcome::Skipped);
        };
        let Some(patch) = verdict.patch else {
            self.annotate_mutation(place, false);
            return Ok(Outcome::Called { changed: false });
        };
        let changed = patch::apply(&hook.name, &mut in_hook_version, &patch)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if changed {
            *object = convert(sent, attributes.request.info, &in_hook_version);
        }
        self.annotate_mutation(place, changed);
        Ok(Outcome::Called { changed })
    }

    async fn validating(self, object: Option<&Value>, index: usize) -> Result<(), ApiError> {
        let place = Place::validation(index);
        let Some(invocation) = self.invocation(object, place).await? else {
            return Ok(());
        };
        let sent = &invocation.resource;
        let in_hook_version = object.map(|o| convert(self.attributes.request.info, sent, o));
        self.ask(sent, in_hook_version.as_ref(), place).await?;
        Ok(())
    }

    /// Calls the hook with `object` (in the hook's version `sent`) and
    /// settles the answer: a failed call as the hook's failure policy says
    /// (`None` when ignored), a refusal as the client's error; otherwise the
    /// verdict, its warnings and audit annotations passed on.
    async fn ask(
        self,
        sent: &ResourceInfo,
        object: Option<&Value>,
        place: Place,
    ) -> Result<Option<review::Verdict>, ApiError> {
        let verdict = match self.call(sent, object, place.mutating).await {
            Ok(verdict) => verdict,
            Err(error) => {
                self.fail(error, place)?;
                return Ok(None);
            }
        };
        self.relay(&verdict);
        if !verdict.allowed {
            return Err(denied(&self.hook.name, verdict.status));
        }
        Ok(Some(verdict))
    }

    /// Whether the hook is called (and in which version), checking dry
    /// runs: a hook that may have side effects refuses a dry-run request.
    async fn invocation(
        self,
        object: Option<&Value>,
        place: Place,
    ) -> Result<Option<matching::Invocation>, ApiError> {
        let (hook, attributes) = (self.hook, self.attributes);
        let invocation = match matching::should_call(self.inner, hook, attributes, object).await {
            Ok(Some(invocation)) => invocation,
            Ok(None) => return Ok(None),
            Err(MatchError::Api(e)) => return Err(e),
            Err(MatchError::Call(text)) => {
                self.fail(CallError(text), place)?;
                return Ok(None);
            }
        };
        if attributes.request.dry_run && !hook.dry_run_safe() {
            return Err(ApiError::BadRequest(format!(
                "admission webhook \"{}\" does not support dry run",
                hook.name
            )));
        }
        Ok(Some(invocation))
    }

    /// One review sent and its answer checked.
    async fn call(
        self,
        sent: &ResourceInfo,
        object: Option<&Value>,
        mutating: bool,
    ) -> Result<review::Verdict, CallError> {
        let (inner, hook, attributes) = (self.inner, self.hook, self.attributes);
        if !hook.review_versions.iter().any(|v| v == "v1") {
            return Err(CallError(
                "webhook does not accept known AdmissionReview versions".into(),
            ));
        }
        let old_in_hook_version = attributes
            .request
            .old
            .filter(|_| attributes.request.operation != crate::admission_plugins::Operation::Create)
            .map(|old| convert(attributes.request.info, sent, old));
        let request = review::request(attributes, sent, object, old_in_hook_version.as_ref());
        let target = target::resolve(inner, hook.endpoint.as_ref(), hook.timeout.as_secs())
            .map_err(|(url, e)| {
                CallError(format!("failed to call webhook: Post \"{url}\": {e}"))
            })?;
        let body = serde_json::to_vec(&request.body).map_err(|e| CallError(e.to_string()))?;
        let answer = client::post(
            &inner.webhook_trust,
            hook.ca_bundle.as_deref(),
            &target,
            body,
            hook.timeout,
        )
        .await
        .map_err(|e| {
            CallError(format!(
                "failed to call webhook: Post \"{}\": {e}",
                target.url
            ))
        })?;
        review::verify(&request.uid, mutating, &answer)
            .map_err(|e| CallError(format!("received invalid webhook response: {e}")))
    }

    /// A failed call: the request fails under `Fail`, goes on under `Ignore`
    /// (noted for the audit log, as upstream's failed-open annotation).
    fn fail(self, error: CallError, place: Place) -> Result<(), ApiError> {
        let (hook, attributes) = (self.hook, self.attributes);
        let message = format!("failed calling webhook \"{}\": {}", hook.name, error.0);
        if !hook.ignore_failures {
            tracing::warn!(webhook = %hook.name, error = %error.0, "webhook call failed, failing closed");
            return Err(ApiError::Internal(message));
        }
        tracing::warn!(webhook = %hook.name, error = %error.0, "webhook call failed, failing open");
        let Place {
            round,
            index,
            mutating,
        } = place;
        let kind = if mutating { "mutation" } else { "validating" };
        attributes.request.notes.annotate(
            format!("failed-open.{kind}.webhook.admission.k8s.io/round_{round}_index_{index}"),
            hook.name.clone(),
        );
        Ok(())
    }

    /// Passes a hook's warnings to the client and its audit annotations to the
    /// audit log (keyed `<webhook name>/<key>`, as upstream prefixes them).
    fn relay(self, verdict: &review::Verdict) {
        let (hook, attributes) = (self.hook, self.attributes);
        for warning in &verdict.warnings {
            attributes.request.notes.warn(warning.clone());
        }
        for (key, value) in &verdict.audit_annotations {
            attributes
                .request
                .notes
                .annotate(format!("{}/{key}", hook.name), value.clone());
        }
    }

    /// Upstream's mutation annotation: which configuration's hook ran in which
    /// round and whether it changed the object.
    fn annotate_mutation(self, Place { round, index, .. }: Place, mutated: bool) {
        let (hook, attributes) = (self.hook, self.attributes);
        let value =
            json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": mutated});
        attributes.request.notes.annotate(
            format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}"),
            value.to_string(),
        );
    }
}

/// `object`, of `from`'s version, in `to`'s (the same stored resource).
fn convert(from: &ResourceInfo, to: &ResourceInfo, object: &Value) -> Value {
    if (from.group, from.version) == (to.group, to.version) {
        object.clone()
    } else {
        to.from_storage(from.to_storage(object.clone()))
    }
}

/// The client's answer to a refusal: the hook's Status with upstream's
/// message prefix, a code of at least 400 and Failure as its status.
pub(super) fn denied(hook: &str, status: Option<Value>) -> ApiError {
    let status = status.unwrap_or(Value::Null);
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let reason = status["reason"].as_str().unwrap_or("").to_string();
    let denied_by = format!("admission webhook \"{hook}\" denied the request");
    let message = match status["message"].as_str().filter(|m| !m.is_empty()) {
        Some(text) => format!("{denied_by}: {text}"),
        None if !reason.is_empty() => format!("{denied_by}: {reason}"),
        None => format!("{denied_by} without explanation"),
    };
    ApiError::Refused {
        code,
        reason,
        message,
        details: status.get("details").cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_upstreams() {
        let error = denied(
            "deny.example.com",
            Some(json!({"code": 403, "reason": "Forbidden", "message": "no configmaps here"})),
        );
        crate::status::assert_status(
            &error,
            403,
            "Forbidden",
            "admission webhook \"deny.example.com\" denied the request: no configmaps here",
        );
    }

    #[test]
    fn a_bare_refusal_is_a_400_without_explanation() {
        let status = denied("deny.example.com", None).to_status();
        assert_eq!(status["code"], 400);
        assert!(status.get("reason").is_none());
        assert_eq!(
            status["message"],
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
        // A code below 400 cannot make a refusal look like a success.
        let low = denied(
            "d.example.com",
            Some(json!({"code": 200, "reason": "Nope"})),
        )
        .to_status();
        assert_eq!(low["code"], 400);
        assert_eq!(
            low["message"],
            "admission webhook \"d.example.com\" denied the request: Nope"
        );
    }
}
