//! Rate limiters deciding how long a failed item waits before it is retried.
//!
//! The default combines a per-item exponential backoff (so one broken object backs
//! off on its own) with an overall token bucket (so a burst of failures across many
//! objects cannot hammer the API server), taking the longer of the two delays.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Decides the delay before an item is retried, and remembers failures per item.
pub trait RateLimiter<T>: Send + Sync {
    /// Records one more failure of `item` and returns how long it should wait.
    fn when(&self, item: &T) -> Duration;
    /// Clears the failure history of `item` (it succeeded or was abandoned).
    fn forget(&self, item: &T);
    /// How many failures of `item` are currently remembered.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
pub struct ItemExponentialBackoff<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ItemExponentialBackoff<T> {
    /// Backoff starting at `base` and never exceeding `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The delay after `failures` previous failures (pure, for callers and tests).
    pub fn delay_for(&self, failures: u32) -> Duration {
        // Past 2^40 * base every sane maximum is exceeded; stop before the shift overflows.
        if failures >= 40 {
            return self.max;
        }
        let nanos = self.base.as_nanos().saturating_mul(1u128 << failures);
        let capped = nanos.min(self.max.as_nanos());
        Duration::from_nanos(u64::try_from(capped).unwrap_or(u64::MAX))
    }
}

impl<T: Eq + Hash + Clone + Send> RateLimiter<T> for ItemExponentialBackoff<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(item.clone()).or_insert(0);
        let delay = self.delay_for(*count);
        *count = count.saturating_add(1);
        delay
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// An overall token bucket: `qps` tokens per second, holding at most `burst`.
///
/// Every call reserves a token; when the bucket is empty the caller is told how
/// long until its token exists, so delays grow with the backlog of reservations.
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

struct BucketState {
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket refilled at `qps` per second, holding at most `burst` tokens.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst: f64::from(burst),
            state: Mutex::new(BucketState {
                tokens: f64::from(burst),
                last: None,
            }),
        }
    }

    /// Reserves one token at `now` and returns how long until it is available.
    pub fn reserve_at(&self, now: Instant) -> Duration {
        let mut state = self.state.lock();
        if let Some(last) = state.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        }
        // Time never runs backwards for the bucket, even if callers pass older instants.
        state.last = Some(state.last.map_or(now, |last| last.max(now)));
        state.tokens -= 1.0;
        if state.tokens >= 0.0 || self.qps <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-state.tokens / self.qps)
        }
    }
}

impl<T> RateLimiter<T> for TokenBucket {
    fn when(&self, _item: &T) -> Duration {
        self.reserve_at(Instant::now())
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// Combines limiters: the delay is the longest any of them asks for.
pub struct MaxOf<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOf<T> {
    /// Combines `limiters`; with none, every delay is zero.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOf<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// First delay of the default per-item backoff.
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest delay of the default per-item backoff.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Refill rate of the default overall bucket.
pub const DEFAULT_QPS: f64 = 10.0;
/// Capacity of the default overall bucket.
pub const DEFAULT_BURST: u32 = 100;

/// The controller default: per-item 5 ms → 1000 s backoff, and a 10 qps / burst 100 bucket.
pub fn default_rate_limiter<T: Eq + Hash + Clone + Send + 'static>() -> MaxOf<T> {
    MaxOf::new(vec![
        Box::new(ItemExponentialBackoff::new(
            DEFAULT_BASE_DELAY,
            DEFAULT_MAX_DELAY,
        )),
        Box::new(TokenBucket::new(DEFAULT_QPS, DEFAULT_BURST)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_backoff_doubles_from_5ms_and_caps_at_1000s() {
        let limiter = ItemExponentialBackoff::new(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY);
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"a")).collect();
        assert_eq!(
            delays,
            [5, 10, 20, 40, 80].map(Duration::from_millis).to_vec()
        );
        assert_eq!(limiter.num_requeues(&"a"), 5);
        // 5ms * 2^18 = 1310.72 s > 1000 s.
        assert_eq!(limiter.delay_for(17), Duration::from_millis(5 << 17));
        assert_eq!(limiter.delay_for(18), DEFAULT_MAX_DELAY);
        assert_eq!(limiter.delay_for(1000), DEFAULT_MAX_DELAY);
        for _ in 0..100 {
            limiter.when(&"a");
        }
        assert_eq!(limiter.when(&"a"), DEFAULT_MAX_DELAY);
    }

    #[test]
    fn item_backoff_is_per_item_and_forget_resets() {
        let limiter = ItemExponentialBackoff::new(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY);
        limiter.when(&"a");
        limiter.when(&"a");
        assert_eq!(limiter.when(&"b"), Duration::from_millis(5));
        assert_eq!(limiter.num_requeues(&"a"), 2);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
        assert_eq!(limiter.num_requeues(&"b"), 1);
    }

    #[test]
    fn token_bucket_allows_burst_then_spaces_at_qps() {
        let bucket = TokenBucket::new(10.0, 100);
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve_at(t0), Duration::ZERO);
        }
        // The 101st token exists 100 ms later, the 102nd 200 ms later.
        assert_eq!(bucket.reserve_at(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve_at(t0), Duration::from_millis(200));
        // One second later ten tokens were refilled; two were already owed.
        let t1 = t0 + Duration::from_secs(1);
        let d = bucket.reserve_at(t1);
        assert_eq!(d, Duration::ZERO);
        // Refill never exceeds the burst.
        let t2 = t1 + Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(bucket.reserve_at(t2), Duration::ZERO);
        }
        assert_eq!(bucket.reserve_at(t2), Duration::from_millis(100));
    }

    #[test]
    fn default_limiter_takes_the_longer_delay() {
        let limiter = default_rate_limiter::<String>();
        // Fresh items get the per-item 5 ms while the bucket has tokens.
        assert_eq!(limiter.when(&"x".to_string()), Duration::from_millis(5));
        assert_eq!(limiter.when(&"x".to_string()), Duration::from_millis(10));
        assert_eq!(limiter.num_requeues(&"x".to_string()), 2);
        // Drain the bucket with other items: the bucket's delay then dominates.
        for i in 0..200 {
            limiter.when(&format!("item-{i}"));
        }
        let d = limiter.when(&"fresh".to_string());
        assert!(
            d >= Duration::from_secs(9),
            "bucket delay should dominate, got {d:?}"
        );
        limiter.forget(&"x".to_string());
        assert_eq!(limiter.num_requeues(&"x".to_string()), 0);
    }
}
