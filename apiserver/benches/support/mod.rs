//! What the API server's benches share: their size knobs from the
//! environment, so `BENCH_SCALE=0.1` shrinks every one of them alike for a
//! quick smoke run, and the allocator they run on.

/// jemalloc, the allocator the `skiff` binary runs on (cli/src/allocator.rs),
/// so the server measured here allocates as the product does. On glibc's
/// malloc the API path spent about a fifth of its CPU in the allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
