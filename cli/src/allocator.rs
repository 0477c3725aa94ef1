//! The process's memory allocator: jemalloc, set up so that memory freed
//! after a peak (a big list, a burst of writes) goes back to the OS within
//! seconds instead of staying in the process as glibc's per-thread arenas
//! keep it.
//!
//! A background thread purges unused pages on jemalloc's decay schedule, so
//! an idle server shrinks too; without it purging only happens when some
//! thread allocates. Freed pages are returned with `MADV_DONTNEED` right
//! away (`muzzy_decay_ms:0`) rather than `MADV_FREE`, which leaves them
//! counted in RSS until the kernel is short of memory — on an edge device
//! RSS is what the operator sees and what the OOM killer reads.
//! `_RJEM_MALLOC_CONF` in the environment overrides these settings.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's `const char *malloc_conf`: a plain pointer to a C string.
#[repr(transparent)]
pub(crate) struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable C string.
unsafe impl Sync for MallocConf {}

/// Read by jemalloc at its first allocation (the symbol name carries the
/// prefix tikv-jemalloc-sys builds jemalloc with).
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub(crate) static malloc_conf: MallocConf =
    MallocConf(c"background_thread:true,dirty_decay_ms:5000,muzzy_decay_ms:0".as_ptr());
