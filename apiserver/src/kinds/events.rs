//! Events, in both API groups: names are path segments (recorders put
//! dots and colons in them); core/v1 events print upstream's columns.

use super::KindStrategy;
use crate::table::Printer;
use crate::validation::NameRule;
use crate::watch_cache::CacheForm;

/// Core `events`.
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

    fn printer(&self) -> &'static Printer {
        &crate::table::core::EVENTS
    }
}

/// `events.k8s.io/v1` events (the same objects, NAME and AGE columns).
#[derive(Debug)]
pub(crate) struct EventsV1;

impl KindStrategy for EventsV1 {
    /// Held as served JSON: bulk data the server itself rarely reads.
    fn cache_form(&self) -> CacheForm {
        CacheForm::Encoded
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }
}
