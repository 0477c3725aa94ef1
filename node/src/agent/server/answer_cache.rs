//! Answers from the API server kept for a while (the kubelet's caches of
//! TokenReviews and SubjectAccessReviews): each answer holds until its time
//! to live runs out, and the cache never grows past [`CACHE_LIMIT`] entries
//! (expired ones go first, then all).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Answers kept at most.
pub(crate) const CACHE_LIMIT: usize = 4096;

/// Answers by key, each with when it expires.
pub(crate) struct AnswerCache<K, V> {
    answers: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> AnswerCache<K, V> {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self {
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// The answer for `key`, unless there is none or it expired.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers
            .get(key)
            .filter(|(_, expires)| *expires > Instant::now())
            .map(|(value, _)| value.clone())
    }

    /// Keeps `value` for `key` for `ttl`.
    pub(crate) fn insert(&self, key: K, value: V, ttl: Duration) {
        let now = Instant::now();
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() >= CACHE_LIMIT {
            answers.retain(|_, (_, expires)| *expires > now);
            if answers.len() >= CACHE_LIMIT {
                answers.clear();
            }
        }
        answers.insert(key, (value, now + ttl));
    }
}
