//! Events, in both API groups: names are path segments (recorders put
//! dots and colons in them), and the watch cache holds them as served JSON.
//!
//! Validation is upstream's: every Event passes the legacy checks (its
//! namespace agrees with the regarding object's; an Event with an
//! `eventTime` names its reporter, action and reason within their lengths),
//! and one written through `events.k8s.io/v1` also passes the strict ones
//! (a DNS-subdomain name, an `eventTime`, a type of `Normal` or `Warning`,
//! none of the deprecated fields, and on update nothing but its series
//! changed). Errors name the core/v1 fields, as upstream's do for both
//! groups, because both are checked in the stored form.

use serde_json::Value;

use super::{KindStrategy, Written};
use crate::registry::event_v1_to_core;
use crate::status::FieldError;
use crate::validation::{NameRule, validate_name, validate_qualified_name};
use crate::watch_cache::CacheForm;

/// Longest `reportingInstance`, `action` and `reason`.
const SHORT_FIELD_LIMIT: usize = 128;
/// Longest `message` (the v1 `note`).
const NOTE_LIMIT: usize = 1024;

/// Fields an `events.k8s.io/v1` update may not change (core/v1 names).
const IMMUTABLE: &[&str] = &[
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
];

/// Events of both groups (`events.k8s.io/v1` serves the core objects).
#[derive(Debug)]
pub(crate) struct Events;

impl KindStrategy for Events {
    /// Held as served JSON: bulk data the server itself rarely reads.
    fn cache_form(&self) -> CacheForm {
        CacheForm::Encoded
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        // Core events are checked as they are; only the new API's form is
        // renamed (a copy) into the stored form first.
        if written.info.group != "events.k8s.io" {
            legacy(written.object, errors);
            return;
        }
        let core = |object: &Value| event_v1_to_core(object.clone());
        let event = core(written.object);
        legacy(&event, errors);
        match written.old.map(core) {
            None => strict_create(&event, errors),
            Some(old) => {
                if old["series"] != event["series"] {
                    series(&event, errors);
                }
                for field in IMMUTABLE {
                    crate::validation::workloads::immutable(&old, &event, &[field], errors);
                }
            }
        }
    }
}

/// A string field's text, empty when absent.
fn text<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field].as_str().unwrap_or("")
}

/// Whether a timestamp field is set (Go's zero time when it is not).
fn is_set(event: &Value, field: &str) -> bool {
    !text(event, field).is_empty()
}

/// The checks every Event passes, whichever group it is written through.
fn legacy(event: &Value, errors: &mut Vec<FieldError>) {
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or("");
    let regarding = text(&event["involvedObject"], "namespace");
    let mismatch = if !is_set(event, "eventTime") {
        // Old clients put events of cluster-scoped objects in `default`.
        if regarding.is_empty() {
            !namespace.is_empty() && namespace != "default"
        } else {
            namespace != regarding
        }
    } else {
        regarding.is_empty() && namespace != "default" && namespace != "kube-system"
    };
    if mismatch {
        errors.push(FieldError::invalid(
            "involvedObject.namespace",
            regarding,
            "does not match event.namespace",
        ));
    }
    if !is_set(event, "eventTime") {
        return;
    }
    let controller = text(event, "reportingComponent");
    if controller.is_empty() {
        errors.push(FieldError::required("reportingController", ""));
    }
    errors.extend(validate_qualified_name(controller, "reportingController"));
    for (field, limit) in [
        ("reportingInstance", SHORT_FIELD_LIMIT),
        ("action", SHORT_FIELD_LIMIT),
        ("reason", SHORT_FIELD_LIMIT),
        ("message", NOTE_LIMIT),
    ] {
        let value = text(event, field);
        if value.is_empty() && field != "message" {
            errors.push(FieldError::required(field, ""));
        }
        if value.len() > limit {
            errors.push(FieldError::invalid(
                field,
                "",
                format!("can have at most {limit} characters"),
            ));
        }
    }
}

/// What a new `events.k8s.io/v1` Event must be beyond the legacy checks.
fn strict_create(event: &Value, errors: &mut Vec<FieldError>) {
    let name = event["metadata"]["name"].as_str().unwrap_or("");
    if !name.is_empty() {
        errors.extend(validate_name(NameRule::Subdomain, name, "metadata.name"));
    }
    series(event, errors);
    if !is_set(event, "eventTime") {
        errors.push(FieldError::required("eventTime", ""));
    }
    let kind = text(event, "type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            "",
            format!("has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if is_set(event, field) {
            errors.push(FieldError::invalid(field, "", "needs to be unset"));
        }
    }
    if event["count"].as_i64().is_some_and(|c| c != 0) {
        errors.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    let source = &event["source"];
    if !text(source, "component").is_empty() || !text(source, "host").is_empty() {
        errors.push(FieldError::invalid("source", "", "needs to be unset"));
    }
}

/// A series counts at least two occurrences and says when it saw the last.
fn series(event: &Value, errors: &mut Vec<FieldError>) {
    let series = &event["series"];
    if !series.is_object() {
        return;
    }
    if series["count"].as_i64().unwrap_or(0) < 2 {
        errors.push(FieldError::invalid(
            "series.count",
            "",
            "should be at least 2",
        ));
    }
    if !is_set(series, "lastObservedTime") {
        errors.push(FieldError::required("series.lastObservedTime", ""));
    }
}
