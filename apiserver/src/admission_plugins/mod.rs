//! Validating admission that depends on who writes: the checks upstream
//! runs as admission plugins after an object is defaulted and validated and
//! before it is stored (NodeRestriction, RBAC's escalation checks, the
//! CertificateSigningRequest signer checks, LimitRanger's checks, Pod
//! Security, ValidatingAdmissionPolicy, the validating admission webhooks,
//! and ResourceQuota last). Each plugin
//! is a module here; [`admit`] runs them in order, and the first refusal
//! wins. Plugins that have more to say than yes or no leave warnings and
//! audit annotations in the request's notes. Their settings come from the
//! admission configuration file (`config`), read once at start.
//! [`mutate_create`] is the built-in mutating step: LimitRanger's container
//! defaults, and DefaultIngressClass's and DefaultStorageClass's class for
//! Ingresses and PersistentVolumeClaims that name none, after the kind's
//! defaults; the mutating admission webhooks
//! (`webhook::mutate`, creates and updates) follow it, before validation.
//! Validating webhooks (`webhook`) run in [`admit`] after the built-in
//! plugins and before ResourceQuota, as upstream orders them.
//!
//! Plugins must not write anything: a refused request leaves no trace.
//! What a plugin must hold until the write is stored (the namespace's quota
//! lock) it hands back in [`Admitted`].

mod certificates;
pub(crate) mod config;
mod default_class;
pub(crate) mod limit_ranger;
pub(crate) mod node_password;
pub(crate) mod node_restriction;
pub(crate) mod pod_security;
mod rbac_escalation;
pub(crate) mod resource_quota;
pub(crate) mod validating_policy;
pub(crate) mod webhook;

use std::sync::Arc;

use serde_json::Value;

use crate::authn::UserInfo;
use crate::registry::{ResourceInfo, Subresource};
use crate::request_notes::RequestNotes;
use crate::server::Inner;
use crate::status::ApiError;
use config::{AdmissionConfig, AdmissionConfigError};

/// What the plugins were configured with at start.
#[derive(Debug, Clone, Default)]
pub(crate) struct PluginSettings {
    pub pod_security: pod_security::PodSecurityConfig,
}

impl PluginSettings {
    /// Each plugin's settings from the configuration file, or every
    /// plugin's defaults without one.
    pub(crate) fn load(file: Option<&std::path::Path>) -> Result<Self, AdmissionConfigError> {
        let Some(file) = file else {
            return Ok(Self::default());
        };
        let config = AdmissionConfig::load(file)?;
        let pod_security = match config.plugin(pod_security::PLUGIN_NAME) {
            Some(settings) => pod_security::PodSecurityConfig::parse(settings)
                .map_err(|message| config.plugin_error(pod_security::PLUGIN_NAME, message))?,
            None => Default::default(),
        };
        Ok(Self { pod_security })
    }
}

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// The operation's name in admission rules, reviews and CEL's
    /// `request.operation`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One write, as the plugins see it.
#[derive(Clone, Copy)]
pub(crate) struct WriteRequest<'a> {
    pub user: &'a UserInfo,
    /// Where plugins leave warnings and audit annotations.
    pub notes: &'a RequestNotes,
    pub operation: Operation,
    pub info: &'a ResourceInfo,
    pub subresource: Option<Subresource>,
    /// The stored object (updates and deletes; for an eviction the pod,
    /// for a token request the service account).
    pub old: Option<&'a Value>,
    /// The object about to be stored (creates and updates), after defaults
    /// and validation.
    pub new: Option<&'a Value>,
    /// A dry run: nothing will be stored (webhooks with side effects
    /// refuse it).
    pub dry_run: bool,
}

/// What an admitted write holds until it is stored (or given up): its
/// quota charge when a quota counted it, so the next write checked counts
/// it until the cache shows it (and a write that fails charges nothing).
#[must_use = "hold it until the write is stored"]
#[derive(Default)]
pub(crate) struct Admitted {
    quota: Option<resource_quota::ledger::QuotaCharge>,
}

impl Admitted {
    /// Records that the admitted write was stored as `object` (its quota
    /// charge then lasts until the cache shows that revision).
    pub(crate) fn stored(&mut self, object: &Value) {
        let revision = crate::object::resource_version(object);
        if let (Some(quota), Some(revision)) = (self.quota.as_mut(), revision) {
            quota.stored(revision);
        }
    }
}

/// Runs every plugin on `request`.
pub(crate) async fn admit(inner: &Inner, request: &WriteRequest<'_>) -> Result<Admitted, ApiError> {
    tracing::trace!(
        user = %request.user.name,
        operation = ?request.operation,
        resource = %request.info.qualified(),
        subresource = ?request.subresource.map(Subresource::name),
        has_old = request.old.is_some(),
        has_new = request.new.is_some(),
        "admission plugins"
    );
    node_restriction::admit(inner, request)?;
    limit_ranger::validate(inner, request)?;
    pod_security::admit(inner, request).await?;
    rbac_escalation::check(&inner.authorizer, &inner.rbac, request)?;
    certificates::check(&inner.authorizer, request)?;
    // Upstream's order: built-in plugins, then ValidatingAdmissionPolicy,
    // then validating webhooks, and ResourceQuota last.
    validating_policy::admit(inner, request)?;
    webhook::validate(inner, request).await?;
    let quota = resource_quota::admit(inner, request)?;
    if let Some(charge) = &quota
        && !charge.shared.is_empty()
        && !request.dry_run
    {
        let namespace = request
            .new
            .and_then(|o| crate::object::meta_str(o, "namespace"))
            .unwrap_or("");
        resource_quota::shared::reserve(inner, request, namespace, &charge.shared).await?;
    }
    Ok(Admitted { quota })
}

/// Mutating admission of a new object, after its kind's defaults and
/// before validation: LimitRanger's container defaults for pods, and the
/// default class for Ingresses and PersistentVolumeClaims that name none.
pub(crate) fn mutate_create(inner: &Inner, info: &ResourceInfo, object: &mut Value) {
    limit_ranger::default_pod(inner, info, object);
    default_class::default_class(inner, info, object);
}

/// The objects of `group`'s v1 `resource` stored in `namespace`, from its
/// watch cache (empty when the resource has none).
pub(crate) fn namespace_objects(
    inner: &Inner,
    group: &str,
    resource: &str,
    namespace: &str,
) -> Vec<Arc<Value>> {
    inner
        .registry
        .get(group, "v1", resource)
        .map(|info| cached_in_namespace(inner, &info, namespace))
        .unwrap_or_default()
}

/// The objects of `info` stored in `namespace`, from its watch cache.
pub(super) fn cached_in_namespace(
    inner: &Inner,
    info: &ResourceInfo,
    namespace: &str,
) -> Vec<Arc<Value>> {
    let Ok(cache) = inner.cache(info) else {
        return Vec::new();
    };
    let prefix = info.collection_prefix(Some(namespace));
    let snapshot = cache.snapshot();
    snapshot
        .under(&prefix)
        .map(|(_, object)| object.value())
        .collect()
}
