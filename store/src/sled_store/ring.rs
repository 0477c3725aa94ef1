//! The in-memory ring of recently published events. Watchers that keep up are
//! served from here without touching disk; it is bounded by event count and by
//! bytes so a burst of large writes cannot grow memory without limit.

use std::collections::VecDeque;

use crate::{Event, Revision};

/// Recent events with contiguous revisions, oldest first.
pub(crate) struct EventRing {
    events: VecDeque<Event>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

/// What a watcher got from the ring.
pub(crate) enum RingRead {
    /// Events after the cursor (filtered) and the revision read up to.
    Events {
        events: Vec<Event>,
        through: Revision,
    },
    /// The revision after the cursor is no longer in the ring: read disk.
    Evicted,
}

fn event_bytes(event: &Event) -> usize {
    let prev = event
        .prev
        .as_ref()
        .map_or(0, |p| p.key.len() + p.value.len());
    event.kv.key.len() + event.kv.value.len() + prev + 64
}

impl EventRing {
    pub(crate) fn new(max_events: usize, max_bytes: usize) -> Self {
        Self {
            events: VecDeque::new(),
            bytes: 0,
            max_events: max_events.max(1),
            max_bytes,
        }
    }

    /// Appends the events of one commit (in revision order, continuing the
    /// ring's revisions) and evicts the oldest beyond the bounds.
    pub(crate) fn push(&mut self, event: Event) {
        if let Some(last) = self.events.back()
            && last.revision() + 1 != event.revision()
        {
            // A gap would make the ring lie about what it holds; start over.
            self.events.clear();
            self.bytes = 0;
        }
        self.bytes += event_bytes(&event);
        self.events.push_back(event);
        while self.events.len() > self.max_events
            || (self.bytes > self.max_bytes && self.events.len() > 1)
        {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= event_bytes(&old);
            }
        }
    }

    /// Events with revision in `(after, through]` whose key starts with
    /// `prefix`, scanning at most `max_scan` revisions.
    pub(crate) fn read(
        &self,
        after: Revision,
        through: Revision,
        prefix: &str,
        max_scan: usize,
    ) -> RingRead {
        let Some(first) = self.events.front().map(Event::revision) else {
            return RingRead::Evicted;
        };
        if after + 1 < first {
            return RingRead::Evicted;
        }
        let start = (after + 1 - first) as usize;
        let mut out = Vec::new();
        let mut last = after;
        for event in self.events.iter().skip(start).take(max_scan) {
            if event.revision() > through {
                break;
            }
            last = event.revision();
            if event.kv.key.starts_with(prefix) {
                out.push(event.clone());
            }
        }
        if last == after && through > after {
            // Nothing of the wanted range is here (e.g. ring reset).
            return RingRead::Evicted;
        }
        RingRead::Events {
            events: out,
            through: last,
        }
    }

    /// Number of events held and their approximate bytes.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.events.len(), self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};
    use bytes::Bytes;

    fn put(revision: Revision, key: &str, len: usize) -> Event {
        Event {
            kind: EventKind::Put,
            kv: KeyValue {
                key: key.into(),
                value: Bytes::from(vec![0u8; len]),
                create_revision: revision,
                mod_revision: revision,
                version: 1,
            },
            prev: None,
        }
    }

    fn revisions(read: RingRead) -> (Vec<Revision>, Revision) {
        match read {
            RingRead::Events { events, through } => {
                (events.iter().map(Event::revision).collect(), through)
            }
            RingRead::Evicted => panic!("expected events"),
        }
    }

    #[test]
    fn reads_filter_by_prefix_and_stop_at_through() {
        let mut ring = EventRing::new(10, 1 << 20);
        for rev in 2..=6 {
            ring.push(put(rev, if rev % 2 == 0 { "a/x" } else { "b/x" }, 1));
        }
        assert_eq!(revisions(ring.read(1, 5, "a/", 100)), (vec![2, 4], 5));
        assert_eq!(revisions(ring.read(3, 6, "", 100)), (vec![4, 5, 6], 6));
        assert_eq!(revisions(ring.read(2, 6, "", 2)), (vec![3, 4], 4));
    }

    #[test]
    fn evicts_by_count_and_bytes() {
        let mut ring = EventRing::new(3, 1 << 20);
        for rev in 2..=6 {
            ring.push(put(rev, "k", 1));
        }
        assert!(matches!(ring.read(2, 6, "", 10), RingRead::Evicted));
        assert_eq!(revisions(ring.read(3, 6, "", 10)), (vec![4, 5, 6], 6));

        let mut ring = EventRing::new(100, 1000);
        for rev in 2..=6 {
            ring.push(put(rev, "k", 400));
        }
        assert_eq!(ring.usage().0, 2);
        assert!(matches!(ring.read(3, 6, "", 10), RingRead::Evicted));
    }
}
