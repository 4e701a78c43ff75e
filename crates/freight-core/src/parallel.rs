//! The one thread pool of freight's parallel work: block copies, checksums, compression,
//! frames written or verified side by side.
//!
//! It is rayon's pool, but not rayon's global one: the global pool cannot be rebuilt, and after
//! `fork()` a child would wait forever on its threads (see [`crate::fork`]). This pool belongs
//! to its process and is built afresh, on first use, in a forked child.

use crate::fork::PerProcess;

static POOL: PerProcess<rayon::ThreadPool> = PerProcess::new();

fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        // Sized as rayon's global pool is (RAYON_NUM_THREADS, else one thread per core).
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("freight-{i}"))
            .build()
            .expect("freight's thread pool starts")
    })
}

/// Runs `work` in this process's pool: every rayon parallel iterator inside it uses the pool's
/// threads. Called only around work large enough to be split (the cost is a hand-off).
pub fn run<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    pool().install(work)
}
