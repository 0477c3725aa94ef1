//! What the API server's benches share: their size knobs from the
//! environment, so `BENCH_SCALE=0.1` shrinks every one of them alike for a
//! quick smoke run.

/// The number in environment variable `name`, or `default` when it is
/// unset or not a number.
pub fn env_number(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `n` scaled by `BENCH_SCALE` (default 1), at least 1.
pub fn scale(n: usize) -> usize {
    ((n as f64 * env_number("BENCH_SCALE", 1.0)) as usize).max(1)
}
