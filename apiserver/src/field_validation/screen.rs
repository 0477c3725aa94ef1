//! Screens the body of a create, update or patch before its handler runs,
//! so the handlers need not know about field validation: the body is read
//! once, checked, and handed on.

use axum::body::Body;
use http::Method;
use serde_json::Value;

use super::{
    Directive, Problem, decide, decode_noting_duplicates, duplicate_fields, strip_unknown,
    unknown_fields,
};
use crate::handlers::Ctx;
use crate::patch::PatchType;
use crate::registry::{ResourceInfo, Subresource};
use crate::status::ApiError;

/// Media types whose bodies are JSON text (duplicates can be found).
fn is_json(content_type: Option<&str>) -> bool {
    matches!(
        content_type,
        None | Some("application/json")
            | Some("application/merge-patch+json")
            | Some("application/strategic-merge-patch+json")
            | Some("application/json-patch+json")
    )
}

/// Checks the body of a write for unknown and duplicate fields. Returns the
/// body to hand on and the warnings to add to the response; a Strict
/// request with offending fields fails here. Requests it does not screen
/// (reads, deletes, apply patches, subresources of other kinds) pass
/// untouched. A created or replaced object that passes with unknown fields
/// is handed on without them, as upstream drops them when it decodes; it is
/// handed on decoded too (`Ctx::decoded`), so its handler parses it once.
pub(crate) async fn screen(
    ctx: &mut Ctx,
    method: &Method,
    body: Body,
) -> Result<(Body, Vec<String>), ApiError> {
    let info = ctx.info().clone();
    let same_kind = matches!(ctx.target.subresource, None | Some(Subresource::Status));
    let content_type = crate::body::content_type(&ctx.headers);
    let patch_type = content_type
        .as_deref()
        .and_then(PatchType::from_content_type);
    let screened = same_kind
        && match *method {
            Method::POST => ctx.target.name.is_none(),
            Method::PUT => ctx.target.name.is_some(),
            Method::PATCH => patch_type.is_some_and(|p| p != PatchType::Apply),
            _ => false,
        };
    let directive = Directive::parse(ctx.params.field_validation.as_deref())?;
    if !screened || directive == Directive::Ignore {
        return Ok((body, Vec::new()));
    }
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let patch = *method == Method::PATCH;
    let json = is_json(content_type.as_deref());
    // A JSON object is decoded and checked for repeated keys in one pass.
    let (mut input, duplicates): (Option<Value>, Vec<String>) = match patch_type {
        Some(kind) if patch => (
            patched(ctx, kind, &bytes).await?,
            if json {
                duplicate_fields(&bytes)
            } else {
                Vec::new()
            },
        ),
        _ if json => match decode_noting_duplicates(&bytes) {
            Ok((object, duplicates)) => (Some(object).filter(Value::is_object), duplicates),
            Err(_) => (None, Vec::new()),
        },
        _ => (
            crate::body::decode_object(&ctx.headers, &bytes).ok(),
            Vec::new(),
        ),
    };
    let mut problems = Vec::new();
    let mut stripped = false;
    if let Some(input) = &mut input
        && let Ok(known) = known_part(&info, input)
    {
        let unknown = unknown_fields(input, &known);
        if !unknown.is_empty() && !patch {
            strip_unknown(input, &known);
            stripped = true;
        }
        problems.extend(unknown.into_iter().map(Problem::Unknown));
    }
    problems.extend(duplicates.into_iter().map(Problem::Duplicate));
    let context = if patch {
        String::new()
    } else {
        format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: ",
            kind = info.kind,
            version = info.version
        )
    };
    let warnings = decide(directive, &problems, &context)?;
    if patch {
        // What was decoded is the patched object, not the request's.
        return Ok((Body::from(bytes), warnings));
    }
    let body = match (&input, stripped) {
        // Handlers that read the body themselves (reviews) get it without
        // the unknown fields too.
        (Some(object), true) => {
            let json = serde_json::to_vec(object).map_err(|e| ApiError::Internal(e.to_string()))?;
            ctx.headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            ctx.headers.remove(http::header::CONTENT_LENGTH);
            Body::from(json)
        }
        _ => Body::from(bytes),
    };
    ctx.decoded = input;
    Ok((body, warnings))
}

/// What of `input` the kind keeps: the typed round trip of a built-in kind,
/// the schema-pruned object of a custom resource (its defaults added too,
/// which is harmless: only fields of `input` missing here count).
fn known_part(info: &ResourceInfo, input: &Value) -> Result<Value, String> {
    match &info.custom {
        Some(custom) => {
            let mut known = input.clone();
            custom.prune_and_default(&mut known);
            Ok(known)
        }
        None => info.roundtrip(input),
    }
}

/// The object a patch would produce from what is stored now (`None` when
/// there is nothing to patch or the patch does not apply: the handler
/// reports that).
async fn patched(ctx: &Ctx, kind: PatchType, bytes: &[u8]) -> Result<Option<Value>, ApiError> {
    let key = ctx.key()?;
    let Some((mut current, _)) =
        crate::handlers::storage::read(&ctx.inner, ctx.info(), &key).await?
    else {
        return Ok(None);
    };
    if let Some(meta) = current.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    Ok(crate::patch::apply(kind, &current, bytes)
        .ok()
        .filter(Value::is_object))
}
