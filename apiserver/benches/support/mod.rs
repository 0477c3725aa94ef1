//! What the API server's benches share: their size knobs from the
//! environment, so `BENCH_SCALE=0.1` shrinks every one of them alike for a
//! quick smoke run, the allocator they run on, and the loop of concurrent
//! clients they drive the server with.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

/// What one [`concurrently`] run measured.
// Each bench reads only the measures it reports.
#[allow(dead_code)]
pub struct Run {
    /// The wall time.
    pub took: Duration,
    /// Every operation's latency, sorted.
    pub latencies: Vec<Duration>,
    /// How many operations failed.
    pub failed: usize,
    /// The CPU time the whole process used meanwhile (client, server and
    /// store alike).
    pub cpu: Duration,
}

/// Runs `op(shared, i)` for `i` in `0..total` on `clients` tasks, each
/// taking the next index when its last operation is done (a closed loop, as
/// that many clients would run) and handing every operation its own clone
/// of `shared` (a client, a store); an operation answers whether it
/// succeeded.
pub async fn concurrently<T, F, Fut>(clients: usize, total: usize, shared: T, op: F) -> Run
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = process_cpu();
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (op, next, shared) = (op.clone(), next.clone(), shared.clone());
            tokio::spawn(async move {
                let (mut latencies, mut failed) = (Vec::new(), 0);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break (latencies, failed);
                    }
                    let t = Instant::now();
                    let succeeded = op(shared.clone(), i).await;
                    latencies.push(t.elapsed());
                    failed += usize::from(!succeeded);
                }
            })
        })
        .collect();
    let (mut latencies, mut failed) = (Vec::new(), 0);
    for task in tasks {
        let (task_latencies, task_failed) = task.await.unwrap_or_default();
        latencies.extend(task_latencies);
        failed += task_failed;
    }
    let took = started.elapsed();
    let cpu = process_cpu().saturating_sub(cpu_before);
    latencies.sort();
    Run {
        took,
        latencies,
        failed,
        cpu,
    }
}

/// CPU time (user and system) this process has used so far.
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
