//! Which class is the default: the rule DefaultIngressClass and
//! DefaultStorageClass admission apply to new objects in the API server and
//! that the persistent volume controller applies to claims created before a
//! default StorageClass existed. Among the classes marked default by their
//! annotation, the newest wins; among equally new ones, the first by name.

use std::collections::BTreeMap;

/// The annotation marking the default StorageClass.
pub const STORAGE_CLASS_MARKER: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta annotation upstream still honours for StorageClasses.
pub const BETA_STORAGE_CLASS_MARKER: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The annotation marking the default IngressClass.
pub const INGRESS_CLASS_MARKER: &str = "ingressclass.kubernetes.io/is-default-class";

/// What the rule reads of one class.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The class's name.
    pub name: &'a str,
    /// Its `metadata.creationTimestamp` as stored (RFC 3339, UTC, whole
    /// seconds: such strings order as the times do).
    pub created: &'a str,
    /// Whether one of the kind's markers is `"true"` on it.
    pub marked: bool,
}

impl<'a> Candidate<'a> {
    /// A class with these annotations, marked when any of `markers` is
    /// `"true"`.
    pub fn new(
        name: &'a str,
        created: &'a str,
        annotations: Option<&BTreeMap<String, String>>,
        markers: &[&str],
    ) -> Self {
        let marked = is_marked(markers, |key| {
            annotations.and_then(|a| a.get(key)).map(String::as_str)
        });
        Self {
            name,
            created,
            marked,
        }
    }
}

/// Whether any of `markers` is `"true"` among a class's annotations, read
/// through `annotation` (so typed objects and stored JSON ask alike).
pub fn is_marked<'v>(markers: &[&str], annotation: impl Fn(&str) -> Option<&'v str>) -> bool {
    markers.iter().any(|m| annotation(m) == Some("true"))
}

/// The name of the default class among `classes`, if any is marked.
pub fn newest_default<'a>(classes: impl IntoIterator<Item = Candidate<'a>>) -> Option<&'a str> {
    classes
        .into_iter()
        .filter(|c| c.marked)
        // The newest; among classes created in the same second the names
        // compare reversed, so that "a" beats "b".
        .max_by(|a, b| a.created.cmp(b.created).then_with(|| b.name.cmp(a.name)))
        .map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_marked_class_wins_then_the_first_by_name() {
        let c = |name, created, marked| Candidate {
            name,
            created,
            marked,
        };
        let classes = [
            c("old", "2026-01-01T00:00:00Z", true),
            c("new-b", "2026-02-01T00:00:00Z", true),
            c("new-a", "2026-02-01T00:00:00Z", true),
            c("newer-not-default", "2026-03-01T00:00:00Z", false),
        ];
        assert_eq!(newest_default(classes), Some("new-a"));
        assert_eq!(newest_default(classes[..1].iter().copied()), Some("old"));
        assert_eq!(newest_default(classes[3..].iter().copied()), None);
    }

    #[test]
    fn any_marker_set_to_true_marks_a_class() {
        let markers = [STORAGE_CLASS_MARKER, BETA_STORAGE_CLASS_MARKER];
        let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let cases = [
            (annotations(&[(STORAGE_CLASS_MARKER, "true")]), true),
            (annotations(&[(BETA_STORAGE_CLASS_MARKER, "true")]), true),
            (annotations(&[(STORAGE_CLASS_MARKER, "false")]), false),
            (annotations(&[(INGRESS_CLASS_MARKER, "true")]), false),
            (annotations(&[]), false),
        ];
        for (annotations, marked) in cases {
            let candidate = Candidate::new("c", "", Some(&annotations), &markers);
            assert_eq!(candidate.marked, marked, "{annotations:?}");
        }
        assert!(!Candidate::new("c", "", None, &markers).marked);
    }
}
