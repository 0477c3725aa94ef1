//! What a request leaves beside its answer: the `Warning` headers the
//! client prints (field validation's unknown fields, Pod Security's "would
//! violate", ...) and the audit annotations the audit log records (Pod
//! Security's enforced policy and audit-mode violations, ...). One
//! [`RequestNotes`] lives per request; the handlers hand it to whatever has
//! something to say, and the dispatcher writes it onto the response —
//! success or failure alike, as upstream's warning recorder and audit
//! context do.
//!
//! Notes never decide anything: nothing here may refuse or change a
//! request.

use std::sync::Arc;

use axum::response::Response;
use http::HeaderValue;
use parking_lot::Mutex;

/// The audit annotations of one request, as the response's extension: the
/// audit log (`crate::audit`, a layer around the router) reads them from
/// there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditAnnotations(pub Vec<(String, String)>);

/// The object a request named only in its body (a create), as the
/// response's extension, so the audit log can name it at every level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotedObject {
    /// The object's namespace; empty when cluster-scoped.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// Warnings and audit annotations gathered while one request is served.
/// Clones share the same notes (a write may be attempted more than once
/// and from nested helpers; every attempt notes into the one request).
#[derive(Debug, Clone, Default)]
pub struct RequestNotes {
    inner: Arc<Mutex<Notes>>,
}

#[derive(Debug, Default)]
struct Notes {
    warnings: Vec<String>,
    annotations: Vec<(String, String)>,
    object: Option<NotedObject>,
}

impl RequestNotes {
    /// Adds a warning for the client; a text already noted is not repeated
    /// (upstream's recorder drops duplicates, so a retried write does not
    /// warn twice).
    pub fn warn(&self, text: impl Into<String>) {
        let text = text.into();
        let mut notes = self.inner.lock();
        if !notes.warnings.contains(&text) {
            notes.warnings.push(text);
        }
    }

    /// Records an audit annotation; the first value given for a key stays,
    /// as upstream keeps it.
    pub fn annotate(&self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let mut notes = self.inner.lock();
        if !notes.annotations.iter().any(|(k, _)| *k == key) {
            notes.annotations.push((key, value.into()));
        }
    }

    /// Notes the name and namespace of the object a request carries in its
    /// body (the first object noted stays).
    pub fn note_object(&self, object: &serde_json::Value) {
        let meta = &object["metadata"];
        let name = meta["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            return;
        }
        let mut notes = self.inner.lock();
        if notes.object.is_none() {
            notes.object = Some(NotedObject {
                namespace: meta["namespace"].as_str().unwrap_or_default().to_string(),
                name: name.to_string(),
            });
        }
    }

    /// The warnings so far, in the order they were noted.
    pub fn warnings(&self) -> Vec<String> {
        self.inner.lock().warnings.clone()
    }

    /// The audit annotations so far, in the order they were noted.
    pub fn annotations(&self) -> Vec<(String, String)> {
        self.inner.lock().annotations.clone()
    }

    /// Adds one `Warning: 299 - "<text>"` header per warning, and the audit
    /// annotations and the noted object as [`AuditAnnotations`] and
    /// [`NotedObject`] extensions for the audit log.
    pub fn write_to(&self, response: &mut Response) {
        let notes = self.inner.lock();
        for warning in &notes.warnings {
            if let Some(value) = warning_header(warning) {
                response.headers_mut().append(http::header::WARNING, value);
            }
        }
        if !notes.annotations.is_empty() {
            response
                .extensions_mut()
                .insert(AuditAnnotations(notes.annotations.clone()));
        }
        if let Some(object) = &notes.object {
            response.extensions_mut().insert(object.clone());
        }
    }
}

/// `299 - "<text>"` with quotes and backslashes escaped, as upstream's
/// warning headers (RFC 7234 with the unknown-agent `-`); UTF-8 text goes
/// as is (Go clients read it so). `None` for text with control characters,
/// which no header can carry.
fn warning_header(text: &str) -> Option<HeaderValue> {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    HeaderValue::from_bytes(format!("299 - \"{escaped}\"").as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    /// The Warning headers `notes` put on a response, and the response.
    fn warning_headers(notes: &RequestNotes) -> (Vec<String>, axum::response::Response) {
        let mut response = "ok".into_response();
        notes.write_to(&mut response);
        let headers = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .map(|v| String::from_utf8(v.as_bytes().to_vec()).expect("UTF-8 header"))
            .collect();
        (headers, response)
    }

    #[test]
    fn warnings_become_escaped_headers_once_each() {
        let notes = RequestNotes::default();
        notes.warn("unknown field \"spec.foo\"");
        notes.clone().warn("unknown field \"spec.foo\"");
        notes.warn("second");
        let (headers, response) = warning_headers(&notes);
        assert_eq!(
            headers,
            [r#"299 - "unknown field \"spec.foo\"""#, r#"299 - "second""#]
        );
        assert!(response.extensions().get::<AuditAnnotations>().is_none());
    }

    #[test]
    fn utf8_warnings_are_kept_and_control_characters_dropped() {
        let notes = RequestNotes::default();
        notes.warn("profil «é»");
        notes.warn("two\nlines");
        let (headers, _) = warning_headers(&notes);
        assert_eq!(headers, ["299 - \"profil «é»\""]);
    }

    #[test]
    fn annotations_keep_the_first_value_and_ride_on_the_response() {
        let notes = RequestNotes::default();
        notes.annotate(
            "pod-security.kubernetes.io/enforce-policy",
            "restricted:latest",
        );
        notes.annotate(
            "pod-security.kubernetes.io/enforce-policy",
            "baseline:latest",
        );
        let mut response = "ok".into_response();
        notes.write_to(&mut response);
        assert_eq!(
            response.extensions().get::<AuditAnnotations>(),
            Some(&AuditAnnotations(vec![(
                "pod-security.kubernetes.io/enforce-policy".into(),
                "restricted:latest".into()
            )]))
        );
    }
}
