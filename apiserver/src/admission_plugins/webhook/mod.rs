//! Dynamic admission webhooks (upstream's MutatingAdmissionWebhook and
//! ValidatingAdmissionWebhook plugins): the hooks the stored
//! `MutatingWebhookConfiguration`s and `ValidatingWebhookConfiguration`s
//! declare are called with an `admission.k8s.io/v1` AdmissionReview over
//! HTTPS for every write they match. Mutating hooks run after the built-in
//! mutating step and before validation ([`mutate`]); validating hooks run
//! inside `admission_plugins::admit`, after the built-in plugins and just
//! before ResourceQuota ([`validate`]).
//!
//! One file per job: `source` (the configurations, parsed once per change),
//! `matching` (rules, scope, selectors, match policy), `review` (the wire
//! types and the checks on an answer), `target` (where a hook is reached:
//! its URL, or its Service's ready endpoint), `client` (the TLS call),
//! `patch` (a mutating hook's JSON patch), `dispatch` (the order, failure
//! policies, reinvocation and error wording).
//!
//! Webhooks must never see the object other than over TLS, never receive
//! any credential of this server or of the caller, and are never called for
//! the admissionregistration objects themselves (a broken webhook must not
//! lock the administrator out of fixing it).

mod client;
mod dispatch;
mod matching;
mod patch;
mod review;
mod source;
pub(crate) mod target;

use serde_json::Value;

use super::WriteRequest;
use crate::registry::Subresource;
use crate::server::Inner;
use crate::status::ApiError;

pub(crate) use client::WebhookTrust;
pub(crate) use source::WebhookSource;

/// The group whose objects no webhook is asked about.
const EXEMPT_GROUP: &str = "admissionregistration.k8s.io";

/// One write as the webhooks are told about it: the plugins' view, and
/// the write's `fieldManager` for the request's options.
pub(crate) struct Attributes<'a> {
    pub request: WriteRequest<'a>,
    pub field_manager: Option<&'a str>,
}

impl<'a> Attributes<'a> {
    /// The webhooks' view of `request`, a write by `field_manager`.
    pub(crate) fn of(request: &WriteRequest<'a>, field_manager: Option<&'a str>) -> Self {
        Self {
            request: *request,
            field_manager,
        }
    }

    fn exempt(&self) -> bool {
        self.request.info.group == EXEMPT_GROUP
    }

    /// The namespace the request is in: a namespaced object's, or a
    /// Namespace's own name (as upstream puts it in the attributes).
    fn namespace(&self, object: Option<&Value>) -> String {
        let of = |o: &Value| o["metadata"]["namespace"].as_str().map(String::from);
        if self.request.info.is(crate::kinds::Namespaces::RESOURCE) {
            return object
                .or(self.request.old)
                .and_then(|o| o["metadata"]["name"].as_str())
                .unwrap_or("")
                .to_string();
        }
        if !self.request.info.namespaced {
            return String::new();
        }
        object
            .and_then(of)
            .or_else(|| self.request.old.and_then(of))
            .unwrap_or_default()
    }
}

/// Runs the mutating webhooks matching a create or update on `object`
/// (already defaulted and mutated by the built-in step), applying their
/// patches in order, with one reinvocation round as upstream.
pub(crate) async fn mutate(
    inner: &Inner,
    attributes: &Attributes<'_>,
    object: &mut Value,
) -> Result<(), ApiError> {
    if attributes.exempt() {
        return Ok(());
    }
    let hooks = inner.webhooks.mutating(inner);
    if hooks.is_empty() {
        return Ok(());
    }
    dispatch::mutate(inner, &hooks, attributes, object).await?;
    // The patched object as upstream decodes it: a hook's `labels: {}`
    // is no labels.
    crate::object::omit_empty_metadata(object);
    Ok(())
}

/// Runs the validating webhooks matching a write; the first refusal (in
/// configuration order) is the answer.
pub(crate) async fn validate(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    let attributes = Attributes::of(request, None);
    if attributes.exempt() {
        return Ok(());
    }
    let hooks = inner.webhooks.validating(inner);
    if hooks.is_empty() {
        return Ok(());
    }
    // A Scale write is about the Scale, not the object behind it.
    if request.subresource == Some(Subresource::Scale) {
        let scale = |o: &Value| request.info.strategy.scale(request.info, o);
        let new = request.new.map(scale);
        let old = request.old.map(scale);
        let attributes = Attributes {
            request: WriteRequest {
                old: old.as_ref(),
                ..*request
            },
            ..attributes
        };
        return dispatch::validate(inner, &hooks, &attributes, new.as_ref()).await;
    }
    dispatch::validate(inner, &hooks, &attributes, request.new).await
}
