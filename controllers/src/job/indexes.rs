//! Completion indexes of Indexed Jobs and their compressed text form in
//! `status.completedIndexes` ("0-2,5,7-8").

use std::collections::BTreeSet;

/// Parses "1,3-5" into {1, 3, 4, 5}; malformed parts and indexes at or
/// beyond `completions` are ignored.
pub(super) fn parse(text: Option<&str>, completions: i32) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in text.unwrap_or("").split(',').filter(|p| !p.is_empty()) {
        let (from, to) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        if let (Ok(from), Ok(to)) = (from, to) {
            for i in from.max(0)..=to.min(completions - 1) {
                out.insert(i);
            }
        }
    }
    out
}

/// Formats a set of indexes as upstream does: each run of consecutive
/// indexes longer than one becomes "a-b".
pub(super) fn format(indexes: &BTreeSet<i32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_compressed_ranges() {
        let set: BTreeSet<i32> = [0, 1, 2, 5, 7, 8].into();
        assert_eq!(format(&set), "0-2,5,7-8");
        assert_eq!(parse(Some("0-2,5,7-8"), 10), set);
        assert_eq!(parse(Some("0-2,5,7-8"), 8), [0, 1, 2, 5, 7].into());
        assert_eq!(parse(None, 3), BTreeSet::new());
        assert_eq!(format(&BTreeSet::new()), "");
    }
}
