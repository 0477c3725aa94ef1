//! Request dispatch: parse the path and query, pick the verb's handler, and
//! turn every error into a Status response.

mod continue_token;
pub(crate) mod create;
mod delete;
mod list_body;
mod proxy;
mod read;
pub(crate) mod storage;
pub(crate) mod streaming;
mod subresources;
mod update;
mod watch;
mod watch_body;

pub(crate) use update::{apply_error, upsert};

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use crate::admission::{WriteInfo, manager_from_user_agent};
use crate::authn::UserInfo;
use crate::discovery;
use crate::patch::{PATCH_MEDIA_TYPES, PatchType};
use crate::query::Params;
use crate::registry::{ResourceInfo, Subresource};
use crate::request_notes::RequestNotes;
use crate::routing::{self, Route, Target};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::Inner;
use crate::status::{ApiError, json_response};

/// One resource request, parsed.
pub(crate) struct Ctx {
    pub inner: Arc<Inner>,
    pub target: Target,
    pub params: Params,
    pub headers: HeaderMap,
    /// The authenticated (and authorized) caller.
    pub user: UserInfo,
    /// Warnings and audit annotations for the response.
    pub notes: RequestNotes,
    /// The object of a create or replace as the field-validation screen
    /// decoded it (without the fields it stripped), so the handler does not
    /// parse the body a second time. `None` when the screen did not decode
    /// it; the handler then reads the body itself.
    pub decoded: Option<Value>,
}

impl Ctx {
    pub(crate) fn info(&self) -> &Arc<ResourceInfo> {
        &self.target.info
    }

    pub(crate) fn namespace(&self) -> Option<&str> {
        self.target.namespace.as_deref()
    }

    /// The object name from the path (present for object routes).
    pub(crate) fn name(&self) -> Result<&str, ApiError> {
        self.target
            .name
            .as_deref()
            .ok_or(ApiError::MethodNotAllowed)
    }

    pub(crate) fn key(&self) -> Result<String, ApiError> {
        Ok(self.info().key(self.namespace(), self.name()?))
    }

    /// The Table of `objects` (all of resource `info`, with `metadata` as
    /// the Table's list metadata) when the request asked for one; `None`
    /// when it did not.
    pub(crate) fn table(
        &self,
        info: &ResourceInfo,
        objects: &[Value],
        metadata: Value,
    ) -> Option<Result<Value, ApiError>> {
        crate::table::for_request(
            &self.headers,
            self.params.include_object.as_deref(),
            info,
            objects,
            metadata,
        )
    }

    /// The type of the request's patch, from its Content-Type; any other
    /// media type is the client's 415.
    pub(crate) fn patch_type(&self) -> Result<PatchType, ApiError> {
        let content_type = crate::body::content_type(&self.headers).unwrap_or_default();
        PatchType::from_content_type(&content_type)
            .ok_or_else(|| ApiError::UnsupportedMediaType(PATCH_MEDIA_TYPES.into()))
    }

    /// The request's object: the one the screen decoded, else the body read
    /// and decoded here.
    pub(crate) async fn object(&mut self, body: Body) -> Result<Value, ApiError> {
        if let Some(object) = self.decoded.take() {
            return Ok(object);
        }
        let bytes = crate::body::read(&self.headers, body).await?;
        crate::body::decode_object(&self.headers, &bytes)
    }

    /// The request's label and field selectors, the field selector allowed
    /// to name `field_labels` besides the metadata fields; a malformed one
    /// is the client's 400.
    pub(crate) fn selectors(
        &self,
        field_labels: &[&str],
    ) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let labels = LabelSelector::parse(&self.params.label_selector)
            .map_err(|e| ApiError::BadRequest(e.0))?;
        let fields = FieldSelector::parse(&self.params.field_selector, field_labels)
            .map_err(|e| ApiError::BadRequest(e.0))?;
        Ok((labels, fields))
    }

    /// The [`selectors`](Self::selectors) of a collection request (list,
    /// watch, deletecollection) to the resource's field labels, once its
    /// list options are checked too.
    pub(crate) fn collection_selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let selected = self.selectors(self.info().field_labels)?;
        self.params.check_list_options()?;
        Ok(selected)
    }

    /// Refuses what a computed, read-only resource (componentstatuses,
    /// the metrics) does not serve: a subresource (404), or anything but a
    /// GET of the list or one object (405, watches included).
    pub(crate) fn only_get(&self, method: &Method) -> Result<(), ApiError> {
        if self.target.subresource.is_some() {
            return Err(ApiError::PathNotFound);
        }
        if method != Method::GET || self.params.watch {
            return Err(ApiError::MethodNotAllowed);
        }
        Ok(())
    }

    /// Who is writing: `fieldManager`, else derived from the User-Agent.
    pub(crate) fn write_info(&self, subresource: Option<Subresource>) -> WriteInfo {
        let manager = self.params.field_manager.clone().unwrap_or_else(|| {
            manager_from_user_agent(
                self.headers
                    .get(http::header::USER_AGENT)
                    .and_then(|v| v.to_str().ok()),
            )
        });
        WriteInfo {
            manager,
            subresource,
            apply: false,
            user: self.user.clone(),
            notes: self.notes.clone(),
        }
    }
}

/// Entry point for every path not routed explicitly.
pub(crate) async fn dispatch(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let notes = RequestNotes::default();
    let mut response = match handle(inner, request, &notes).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    };
    notes.write_to(&mut response);
    response
}

async fn handle(
    inner: Arc<Inner>,
    request: Request,
    notes: &RequestNotes,
) -> Result<Response, ApiError> {
    // A group/version an APIService hands to a Service (never one served
    // here) goes there, as the caller authorized above.
    if let Some(service) = crate::aggregator::proxy::remote_for(&inner, request.uri().path()) {
        let user = request
            .extensions()
            .get::<UserInfo>()
            .cloned()
            .unwrap_or_else(UserInfo::anonymous);
        return crate::aggregator::proxy::forward(&inner, &service, &user, request).await;
    }
    let (parts, body) = request.into_parts();
    let registry = inner.registry.current();
    let route = routing::parse(parts.uri.path(), &registry)?;
    if matches!(route, Route::CoreVersions | Route::Groups)
        && let Some(version) = discovery::aggregated::negotiate(&parts.headers)
    {
        let core = matches!(route, Route::CoreVersions);
        let mut doc = discovery::aggregated::document(&registry, core, version);
        if !core {
            crate::aggregator::discovery::add_to_aggregated(&mut doc, &inner.aggregated.read());
        }
        let mut response = only_get(&parts.method, doc)?;
        if let Ok(value) = discovery::aggregated::content_type(version).parse() {
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, value);
        }
        response
            .headers_mut()
            .insert(http::header::VARY, http::HeaderValue::from_static("Accept"));
        return Ok(response);
    }
    let target = match route {
        Route::CoreVersions => return only_get(&parts.method, discovery::core_versions()),
        Route::Groups => {
            let mut doc = discovery::groups(&registry);
            crate::aggregator::discovery::add_to_group_list(&mut doc, &inner.aggregated.read());
            return only_get(&parts.method, doc);
        }
        Route::Group(g) => {
            // A local group first; else an aggregated one.
            let doc = discovery::group(&registry, &g).or_else(|e| {
                crate::aggregator::discovery::group(&inner.aggregated.read(), &g).ok_or(e)
            })?;
            return only_get(&parts.method, doc);
        }
        Route::Resources { group, version } => {
            return only_get(
                &parts.method,
                discovery::resources(&registry, &group, &version)?,
            );
        }
        Route::Resource(t) => t,
    };
    if streaming::is_streaming(target.subresource) {
        return streaming::serve(inner, target, Request::from_parts(parts, body)).await;
    }
    if target.subresource == Some(Subresource::Proxy) {
        return proxy::serve(inner, target, Request::from_parts(parts, body)).await;
    }
    let mut params = Params::parse(parts.uri.query())?;
    params.watch |= target.legacy_watch;
    let user = parts
        .extensions
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(UserInfo::anonymous);
    let mut ctx = Ctx {
        inner,
        target,
        params,
        headers: parts.headers,
        user,
        notes: notes.clone(),
        decoded: None,
    };
    let (body, warnings) = crate::field_validation::screen(&mut ctx, &parts.method, body).await?;
    for warning in warnings {
        notes.warn(warning);
    }
    route_verb(ctx, parts.method, body).await
}

fn only_get(method: &Method, doc: Value) -> Result<Response, ApiError> {
    if method == Method::GET {
        Ok(json_response(StatusCode::OK, &doc))
    } else {
        Err(ApiError::MethodNotAllowed)
    }
}

async fn route_verb(mut ctx: Ctx, method: Method, body: Body) -> Result<Response, ApiError> {
    use Subresource::*;
    if ctx.info().legacy_binding {
        return match (method, &ctx.target.name) {
            (Method::POST, None) if ctx.namespace().is_some() => {
                subresources::bind_named_in_body(ctx, body).await
            }
            _ => Err(ApiError::MethodNotAllowed),
        };
    }
    if let Some(review) = ctx.info().review {
        return crate::reviews::serve(ctx, review, method, body).await;
    }
    if ctx.info().component_statuses {
        return crate::component_status::serve(ctx, method).await;
    }
    if let Some(which) = ctx.info().metrics {
        return crate::resource_metrics::serve(ctx, which, method).await;
    }
    let has_name = ctx.target.name.is_some();
    match (method, has_name, ctx.target.subresource) {
        (Method::GET, false, None) if ctx.params.watch => watch::watch(ctx).await,
        (Method::GET, false, None) => read::list(ctx).await,
        (Method::GET, true, None) if ctx.params.watch => watch::watch_one(ctx).await,
        (Method::GET, true, None) => read::get(ctx).await,
        (Method::POST, false, None) if ctx.info().namespaced && ctx.namespace().is_none() => {
            Err(ApiError::MethodNotAllowed)
        }
        (Method::POST, false, None) => create::create(ctx, body).await,
        (Method::PUT, true, None) => update::update(ctx, body).await,
        (Method::PATCH, true, None) => update::patch(ctx, body).await,
        (Method::DELETE, true, None) => delete::delete(ctx, body).await,
        // Namespaced collections are deleted per namespace, as upstream serves them.
        (Method::DELETE, false, None)
            if (ctx.info().namespaced && ctx.namespace().is_none())
                || !ctx.info().strategy.deletes_collections() =>
        {
            Err(ApiError::MethodNotAllowed)
        }
        (Method::DELETE, false, None) => delete::delete_collection(ctx, body).await,
        (Method::GET, true, Some(Status | EphemeralContainers | Resize)) => read::get(ctx).await,
        (Method::PUT, true, Some(Status | Finalize | Approval | EphemeralContainers | Resize)) => {
            update::update(ctx, body).await
        }
        (Method::PATCH, true, Some(Status | Approval | EphemeralContainers | Resize)) => {
            update::patch(ctx, body).await
        }
        (Method::GET, true, Some(Approval)) => read::get(ctx).await,
        (Method::GET, true, Some(Scale)) => subresources::get_scale(ctx).await,
        (Method::PUT, true, Some(Scale)) => subresources::update_scale(ctx, body).await,
        (Method::PATCH, true, Some(Scale)) => subresources::patch_scale(ctx, body).await,
        (Method::POST, true, Some(Binding)) => {
            let binding = ctx.object(body).await?;
            subresources::bind(ctx, binding).await
        }
        (Method::POST, true, Some(Eviction)) => subresources::evict(ctx, body).await,
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// Checks a body's apiVersion/kind against the endpoint and fills them in
/// when absent.
pub(crate) fn check_type(
    object: &mut Value,
    api_version: &str,
    kind: &str,
) -> Result<(), ApiError> {
    let Some(map) = object.as_object_mut() else {
        return Err(ApiError::BadRequest(format!(
            "the body is not a {kind} object"
        )));
    };
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != api_version => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
        Some(_) => {}
        None => {
            map.insert("apiVersion".into(), json!(api_version));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != kind => Err(ApiError::BadRequest(format!(
            "the kind in the data ({k}) does not match the expected kind ({kind})"
        ))),
        Some(_) => Ok(()),
        None => {
            map.insert("kind".into(), json!(kind));
            Ok(())
        }
    }
}

/// A JSON object response.
pub(crate) fn respond(code: StatusCode, object: &Value) -> Result<Response, ApiError> {
    Ok(json_response(code, object))
}

/// Answers a write with the object it stored: the watch cache's encoded copy
/// of that revision when it holds one, else `object` encoded now. A dry
/// run's object was never stored (its resourceVersion is the old one's), so
/// it is always encoded.
pub(crate) fn respond_stored(
    ctx: &Ctx,
    code: StatusCode,
    object: &Value,
) -> Result<Response, ApiError> {
    let cached = (!ctx.params.dry_run)
        .then(|| storage::written_json(&ctx.inner, ctx.info(), object))
        .flatten();
    match cached {
        Some(json) => Ok(crate::status::encoded_json_response(code, json)),
        None => respond(code, object),
    }
}
