//! Events, in both API groups: names are path segments (recorders put
//! dots and colons in them), and the watch cache holds them as served JSON.

use super::KindStrategy;
use crate::validation::NameRule;
use crate::watch_cache::CacheForm;

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
}
