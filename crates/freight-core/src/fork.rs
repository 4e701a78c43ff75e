//! Values that belong to one process: thread pools, async runtimes, connection pools.
//!
//! `fork()` copies a process's memory but only the thread that called it. A thread pool built
//! before the fork still looks alive in the child, and the first job sent to it waits forever
//! for threads that do not exist there (the hang of a `multiprocessing` "fork" pool after one
//! large `dumps` in the parent). The same goes for an async runtime's workers and for pooled
//! connections whose driving tasks ran on them.
//!
//! [`PerProcess`] holds such a value with the fork generation it was built in. A
//! `pthread_atfork` child handler counts forks; a value from an earlier generation is never
//! used (nor dropped: dropping a pool joins threads that are gone) and is built afresh on first
//! use in the child. In the process that built it, a lookup costs one atomic load and compare.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

/// How many forks separate this process from the one that loaded the library (0 there).
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn after_fork_in_child() {
    // Async-signal-safe: one atomic add, nothing allocated, no lock taken.
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The current fork generation; the first call registers the `pthread_atfork` handler.
pub fn generation() -> u64 {
    REGISTER.call_once(|| {
        #[cfg(unix)]
        // SAFETY: registers a handler that only touches an atomic; the handler lives as long as
        // the process (it is a plain function).
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
    GENERATION.load(Ordering::Acquire)
}

struct Slot<T> {
    generation: u64,
    value: T,
}

/// A value built at most once per process generation (see the module's text). Values of
/// earlier generations are leaked on purpose: their threads or connections do not exist in the
/// child, so neither using nor dropping them is safe.
pub struct PerProcess<T> {
    current: AtomicPtr<Slot<T>>,
    _owns: PhantomData<Box<Slot<T>>>,
}

// SAFETY: a `PerProcess<T>` hands out `&T` to any thread and may drop a `T` on another thread
// than the one that built it: exactly what `T: Send + Sync` allows.
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}
unsafe impl<T: Send> Send for PerProcess<T> {}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PerProcess<T> {
    /// Empty: the first `get_or_init` builds the value.
    pub const fn new() -> Self {
        Self {
            current: AtomicPtr::new(std::ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Holding `value`, built in this process.
    pub fn with(value: T) -> Self {
        let slot = Box::new(Slot {
            generation: generation(),
            value,
        });
        Self {
            current: AtomicPtr::new(Box::into_raw(slot)),
            _owns: PhantomData,
        }
    }

    /// This process's value, built by `init` on first use here.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(init())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// This process's value, built by `init` on first use here; `init`'s error is returned and
    /// nothing is kept, so the next call tries again.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let generation = generation();
        let seen = self.current.load(Ordering::Acquire);
        // SAFETY: a published slot is never freed while `self` lives (earlier generations are
        // leaked, the current one is freed only by `drop`), so the reference outlives `&self`.
        if let Some(slot) = unsafe { seen.as_ref() } {
            if slot.generation == generation {
                return Ok(&slot.value);
            }
        }
        let fresh = Box::into_raw(Box::new(Slot {
            generation,
            value: init()?,
        }));
        match self
            .current
            .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // The slot replaced (if any) came from before a fork: leaked, see above.
            // SAFETY: `fresh` was just published and is never freed while `self` lives.
            Ok(_) => Ok(unsafe { &(*fresh).value }),
            Err(winner) => {
                // Another thread of this process published first: use its value, drop ours
                // (built in this process, so dropping it is safe).
                // SAFETY: `fresh` was never published; `winner` is published (see above) and
                // of this generation, since forks happen in another process's timeline.
                unsafe {
                    drop(Box::from_raw(fresh));
                    Ok(&(*winner).value)
                }
            }
        }
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let slot = *self.current.get_mut();
        if slot.is_null() {
            return;
        }
        // SAFETY: `slot` is the published slot, owned by `self`; it is freed only when built in
        // this process (a value from before a fork is leaked, see the type's text).
        unsafe {
            if (*slot).generation == generation() {
                drop(Box::from_raw(slot));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn builds_once_per_generation() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let value = PerProcess::new();
        let a = *value.get_or_init(|| BUILT.fetch_add(1, Ordering::SeqCst));
        let b = *value.get_or_init(|| BUILT.fetch_add(1, Ordering::SeqCst));
        assert_eq!((a, b), (0, 0));
        assert_eq!(BUILT.load(Ordering::SeqCst), 1);
        // What a fork does to the counter (the child handler), seen from here.
        after_fork_in_child();
        let c = *value.get_or_init(|| BUILT.fetch_add(1, Ordering::SeqCst));
        assert_eq!(c, 1, "a value from an earlier generation is rebuilt");
    }

    #[test]
    fn failed_init_keeps_nothing() {
        let value: PerProcess<u8> = PerProcess::new();
        assert!(value.get_or_try_init(|| Err("down")).is_err());
        assert_eq!(*value.get_or_try_init(|| Ok::<u8, &str>(7)).unwrap(), 7);
    }
}
