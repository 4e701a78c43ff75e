//! Nesting limits and stack sizes, shared by the encoder and the decoder so that whatever one
//! writes natively the other reads.

/// Deepest nesting followed natively; the stack grows on the heap as needed up to this.
pub const MAX_DEPTH: usize = 200_000;

/// Deepest nesting of tuples and frozensets (the hashable containers). CPython hashes them
/// recursively on the C stack, so a deeper dict key or set item could overflow it: the encoder
/// sends deeper ones through pickle, and the decoder refuses them.
pub const MAX_HASHABLE_DEPTH: usize = 4096;

/// Stack kept free at every level of nesting for the Python and numpy calls made there (hashing
/// a key, building a datetime, a serializer's code)...
pub const RED_ZONE: usize = 1 << 20;
/// ...and the size of each new stack segment once it runs low.
pub const STACK_SEGMENT: usize = 16 << 20;

use std::cell::Cell;

thread_local! {
    /// The lowest address this thread's current stack may use, once known: 0 until the first
    /// nested value asks, then the thread's own stack or the heap segment it runs on.
    static STACK_LIMIT: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f` with at least RED_ZONE bytes of stack, on a new STACK_SEGMENT when this one runs low
/// (what `stacker::maybe_grow` does, but with a cheaper first look at the main thread's stack:
/// glibc finds it by reading /proc/self/maps, a quarter of a millisecond at the first nested
/// value of a process; issue 32).
#[inline]
pub fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    let sp = stack_pointer();
    let limit = STACK_LIMIT.with(|cell| match cell.get() {
        0 => {
            let limit = probe(sp);
            cell.set(limit);
            limit
        }
        known => known,
    });
    if sp.saturating_sub(limit) >= RED_ZONE {
        f()
    } else {
        grow(f)
    }
}

#[cold]
#[inline(never)]
fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::grow(STACK_SEGMENT, || {
        // stacker knows the bounds of the segment it just made: ours follow it while f runs.
        let inner = match stacker::remaining_stack() {
            Some(remaining) => stack_pointer().saturating_sub(remaining),
            None => usize::MAX, // unknowable: every level grows, as stacker would
        };
        let _restore = RestoreLimit(STACK_LIMIT.with(|cell| cell.replace(inner)));
        f()
    })
}

/// Puts the outer stack's limit back when a segment's work ends, even by unwinding.
struct RestoreLimit(usize);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        STACK_LIMIT.with(|cell| cell.set(self.0));
    }
}

/// An address in the caller's frame: the stack pointer give or take a few hundred bytes, far
/// less than RED_ZONE.
#[inline(always)]
fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// This thread's stack limit; usize::MAX (grow at once) when it cannot be known.
fn probe(sp: usize) -> usize {
    if let Some(limit) = main_thread_limit(sp) {
        return limit;
    }
    // Other threads: pthread_getattr_np reads the thread's own descriptor, no file.
    stacker::remaining_stack().map_or(usize::MAX, |remaining| sp.saturating_sub(remaining))
}

/// The kernel maps nothing within this distance below the main thread's stack (its mmap base
/// keeps a gap of at least 128 MiB), less the 1 MiB guard gap it keeps between a growing stack
/// and the mapping below: a larger RLIMIT_STACK is not trusted past it.
#[cfg(target_os = "linux")]
const MAIN_STACK_CAP: usize = (128 << 20) - (1 << 20);

/// The main thread's stack limit without reading /proc/self/maps: its top holds the executable's
/// name (AT_EXECFN, the last string the kernel copies there, a pointer's width below the top)
/// and it may grow down RLIMIT_STACK from there, as glibc computes it. None when `sp` is not on
/// that stack (another thread, a heap segment) or the limit is unbounded.
#[cfg(target_os = "linux")]
fn main_thread_limit(sp: usize) -> Option<usize> {
    // SAFETY: getauxval, sysconf, strlen and getrlimit only read; AT_EXECFN, when set, is a
    // NUL-terminated string the kernel placed on the stack, alive for the whole process.
    unsafe {
        let execfn = libc::getauxval(libc::AT_EXECFN) as usize;
        let page = libc::sysconf(libc::_SC_PAGESIZE);
        if execfn == 0 || page <= 0 {
            return None;
        }
        let page = page as usize;
        let end = execfn + libc::strlen(execfn as *const libc::c_char) + 1;
        let top = end.checked_add(page - 1)? & !(page - 1);
        let mut rlimit = std::mem::MaybeUninit::<libc::rlimit>::uninit();
        if libc::getrlimit(libc::RLIMIT_STACK, rlimit.as_mut_ptr()) != 0 {
            return None;
        }
        let size = rlimit.assume_init().rlim_cur;
        if size == libc::RLIM_INFINITY {
            return None;
        }
        let size = (size as usize).min(MAIN_STACK_CAP) & !(page - 1);
        let limit = top.checked_sub(size)?;
        (limit < sp && sp <= top).then_some(limit)
    }
}

#[cfg(not(target_os = "linux"))]
fn main_thread_limit(_sp: usize) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_recursion_through_with_stack_does_not_overflow() {
        fn down(n: usize) -> usize {
            if n == 0 {
                return 0;
            }
            with_stack(|| {
                let pad = std::hint::black_box([0u8; 512]);
                down(n - 1) + pad[0] as usize + 1
            })
        }
        let depth = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| down(100_000))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(depth, 100_000);
    }
}
