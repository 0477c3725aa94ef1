//! What upstream's event correlator does before an event is written, beyond
//! turning exact repeats into a series ([`super::Aggregator`]):
//!
//! - [`SimilarEvents`]: an object that keeps reporting the same reason with a
//!   different note each time (a pod failing to schedule for ever-changing
//!   reasons) gets, after [`SIMILAR_LIMIT`] distinct notes within
//!   [`SIMILAR_WINDOW`], one combined Event whose repeats are a series, instead
//!   of a new Event per note.
//! - [`SpamFilter`]: each reporter may write about one object at most
//!   [`SPAM_BURST`] times in a burst, then one more per [`SPAM_REFILL`]; the
//!   rest are dropped, so a controller stuck in a loop cannot flood the store
//!   with Events.
//!
//! Both hold only bounded, self-expiring state: entries that have aged back to
//! "never seen" are swept.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::{EventType, Occurrence};

/// Distinct notes per (object, reason) within [`SIMILAR_WINDOW`] before
/// further ones are combined (upstream's `maxEvents` of its aggregator).
pub const SIMILAR_LIMIT: usize = 10;

/// How long distinct notes are remembered (upstream: ten minutes).
pub const SIMILAR_WINDOW: Duration = Duration::from_secs(10 * 60);

/// The prefix of a combined Event's note, as upstream words it.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// Events one reporter may write about one object at once (upstream's
/// spam filter burst).
pub const SPAM_BURST: u32 = 25;

/// One more event per this long once the burst is spent (upstream: one per
/// five minutes).
pub const SPAM_REFILL: Duration = Duration::from_secs(5 * 60);

/// Most keys either filter tracks; beyond it the stalest are dropped, which
/// only forgets history (as upstream's LRU caches do).
const MAX_KEYS: usize = 4096;

/// A full map drops this fraction (1/n) of its entries at once.
const EVICT_FRACTION: usize = 8;

/// How often the maps are swept of expired entries, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Who reports about which object, and what kind of event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SourceObject {
    controller: String,
    instance: String,
    kind: Option<String>,
    api_version: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    event_type: EventType,
}

impl SourceObject {
    fn of(o: &Occurrence) -> Self {
        let r = &o.regarding;
        Self {
            controller: o.controller.clone(),
            instance: o.instance.clone(),
            kind: r.kind.clone(),
            api_version: r.api_version.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
            event_type: o.kind,
        }
    }
}

/// The distinct notes seen for one (reporter, object, type, reason).
struct NoteSet {
    notes: HashSet<String>,
    last_seen: Instant,
}

/// Combines events that differ only in their note once an object has too many.
#[derive(Default)]
pub(super) struct SimilarEvents {
    seen: HashMap<(SourceObject, String), NoteSet>,
    swept: Option<Instant>,
}

impl SimilarEvents {
    /// Rewrites `o` into the combined event when its (object, reason) already
    /// had [`SIMILAR_LIMIT`] distinct notes in the window. The combined
    /// event's note is the first note that crossed the limit; later ones
    /// become repeats of it (the series key sees one note).
    pub(super) fn combine(&mut self, o: &mut Occurrence, now: Instant) {
        if self
            .swept
            .is_none_or(|t| now.duration_since(t) >= SWEEP_EVERY)
        {
            self.seen
                .retain(|_, s| now.duration_since(s.last_seen) < SIMILAR_WINDOW);
            self.swept = Some(now);
        }
        let key = (SourceObject::of(o), o.reason.clone());
        if !self.seen.contains_key(&key) && self.seen.len() >= MAX_KEYS {
            evict_stalest(&mut self.seen, |s| s.last_seen);
        }
        let set = self.seen.entry(key).or_insert_with(|| NoteSet {
            notes: HashSet::new(),
            last_seen: now,
        });
        if now.duration_since(set.last_seen) >= SIMILAR_WINDOW {
            set.notes.clear();
        }
        set.last_seen = now;
        if set.notes.contains(&o.note) {
            return;
        }
        if set.notes.len() < SIMILAR_LIMIT {
            set.notes.insert(o.note.clone());
            return;
        }
        // Over the limit: every further distinct note is the one combined
        // event. Its note is fixed by the first occurrence to reach here.
        let combined = set
            .notes
            .iter()
            .find(|n| n.starts_with(COMBINED_PREFIX))
            .cloned();
        o.note = match combined {
            Some(note) => note,
            None => {
                let note = super::truncate(format!("{COMBINED_PREFIX}{}", o.note));
                set.notes.insert(note.clone());
                note
            }
        };
    }
}

/// A token bucket per (reporter, object, type).
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.updated).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        self.tokens = (self.tokens + gained).min(f64::from(SPAM_BURST));
        self.updated = now;
    }

    /// Whether the bucket would be full at `now`, i.e. as if never used.
    fn full_at(&self, now: Instant) -> bool {
        let gained = now.duration_since(self.updated).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        self.tokens + gained >= f64::from(SPAM_BURST)
    }
}

/// Drops events beyond a reporter's budget for one object.
#[derive(Default)]
pub(super) struct SpamFilter {
    buckets: HashMap<SourceObject, Bucket>,
    swept: Option<Instant>,
}

impl SpamFilter {
    /// Whether `o` may be written now (spending one token if so).
    pub(super) fn allow(&mut self, o: &Occurrence, now: Instant) -> bool {
        if self
            .swept
            .is_none_or(|t| now.duration_since(t) >= SWEEP_EVERY)
        {
            self.buckets.retain(|_, b| !b.full_at(now));
            self.swept = Some(now);
        }
        let key = SourceObject::of(o);
        if !self.buckets.contains_key(&key) && self.buckets.len() >= MAX_KEYS {
            evict_stalest(&mut self.buckets, |b| b.updated);
        }
        let bucket = self.buckets.entry(key).or_insert(Bucket {
            tokens: f64::from(SPAM_BURST),
            updated: now,
        });
        bucket.refill(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Makes room in a full map: drops the eighth of its entries touched least
/// recently. Dropping a batch, not one entry per insert, keeps a stream of
/// new objects (a scheduler binding thousands of pods) from scanning the
/// whole map on every event.
fn evict_stalest<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    touched: impl Fn(&V) -> Instant,
) {
    let mut ages: Vec<Instant> = map.values().map(&touched).collect();
    let batch = (ages.len() / EVICT_FRACTION).max(1);
    if ages.len() <= batch {
        map.clear();
        return;
    }
    let (_, cutoff, _) = ages.select_nth_unstable(batch - 1);
    let cutoff = *cutoff;
    let mut left = batch;
    map.retain(|_, v| {
        if left > 0 && touched(v) <= cutoff {
            left -= 1;
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::tests::occurrence;
    use super::*;

    #[test]
    fn a_full_map_drops_its_stalest_eighth_at_once() {
        let t0 = Instant::now();
        let mut map: HashMap<usize, Instant> = (0..64)
            .map(|i| (i, t0 + Duration::from_secs(i as u64)))
            .collect();
        evict_stalest(&mut map, |t| *t);
        assert_eq!(map.len(), 56);
        assert!((0..8).all(|i| !map.contains_key(&i)), "the eight oldest go");
        assert!((8..64).all(|i| map.contains_key(&i)), "the rest stay");
    }

    #[test]
    fn a_stream_of_new_objects_stays_within_the_key_limit() {
        let mut filter = SpamFilter::default();
        let t0 = Instant::now();
        for i in 0..(MAX_KEYS * 3) {
            let mut o = occurrence("x");
            o.regarding.name = Some(format!("pod-{i}"));
            assert!(filter.allow(&o, t0), "a first event about an object passes");
        }
        assert!(filter.buckets.len() <= MAX_KEYS);
    }

    #[test]
    fn a_reporter_gets_a_burst_then_one_event_per_refill_per_object() {
        let mut filter = SpamFilter::default();
        let o = occurrence("x");
        let t0 = Instant::now();
        let allowed = (0..40).filter(|_| filter.allow(&o, t0)).count();
        assert_eq!(allowed, SPAM_BURST as usize);
        assert!(!filter.allow(&o, t0 + SPAM_REFILL / 2));
        assert!(filter.allow(&o, t0 + SPAM_REFILL));
        assert!(!filter.allow(&o, t0 + SPAM_REFILL));
        // Another object, and another reporter about the same object, have
        // their own budgets.
        let mut other = occurrence("x");
        other.regarding.name = Some("db".into());
        assert!(filter.allow(&other, t0));
        let mut scheduler = occurrence("x");
        scheduler.controller = "default-scheduler".into();
        assert!(filter.allow(&scheduler, t0));
    }

    #[test]
    fn a_bucket_that_refilled_is_forgotten() {
        let mut filter = SpamFilter::default();
        let o = occurrence("x");
        let t0 = Instant::now();
        assert!(filter.allow(&o, t0));
        let later = t0 + SPAM_REFILL * 2;
        let mut other = occurrence("x");
        other.regarding.name = Some("db".into());
        assert!(filter.allow(&other, later));
        assert_eq!(filter.buckets.len(), 1, "the refilled bucket is swept");
    }

    #[test]
    fn distinct_notes_past_the_limit_become_one_combined_event() {
        let mut similar = SimilarEvents::default();
        let t0 = Instant::now();
        for i in 0..SIMILAR_LIMIT {
            let mut o = occurrence(&format!("0/{i} nodes are available"));
            similar.combine(&mut o, t0);
            assert_eq!(o.note, format!("0/{i} nodes are available"));
        }
        let mut first = occurrence("0/99 nodes are available");
        similar.combine(&mut first, t0);
        assert_eq!(
            first.note,
            format!("{COMBINED_PREFIX}0/99 nodes are available")
        );
        let mut second = occurrence("0/100 nodes are available");
        similar.combine(&mut second, t0);
        assert_eq!(
            second.note, first.note,
            "later ones repeat the combined one"
        );
        // A note seen before the limit still reports as itself.
        let mut known = occurrence("0/3 nodes are available");
        similar.combine(&mut known, t0);
        assert_eq!(known.note, "0/3 nodes are available");
        // Another reason is counted apart.
        let mut other = occurrence("0/101 nodes are available");
        other.reason = "Preempting".into();
        similar.combine(&mut other, t0);
        assert_eq!(other.note, "0/101 nodes are available");
    }

    #[test]
    fn the_similar_count_starts_over_after_the_window() {
        let mut similar = SimilarEvents::default();
        let t0 = Instant::now();
        for i in 0..=SIMILAR_LIMIT {
            similar.combine(&mut occurrence(&format!("n{i}")), t0);
        }
        let mut late = occurrence("fresh");
        similar.combine(&mut late, t0 + SIMILAR_WINDOW + Duration::from_secs(1));
        assert_eq!(late.note, "fresh");
    }
}
