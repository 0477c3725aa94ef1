//! The rate-limited, de-duplicating work queue and the limiters behind its retries.

mod queue;
mod rate_limiter;

pub use queue::WorkQueue;
pub use rate_limiter::{
    DEFAULT_BASE_DELAY, DEFAULT_BURST, DEFAULT_MAX_DELAY, DEFAULT_QPS, ItemExponentialBackoff,
    MaxOf, RateLimiter, TokenBucket, default_rate_limiter,
};
