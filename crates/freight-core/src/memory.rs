//! Large-buffer helpers. On Linux with transparent huge pages in `madvise` mode, a fresh large
//! buffer that nobody advises costs 4-5x a copy in page faults alone; numpy advises its large
//! allocations, and so must every large buffer freight fills.

/// Below this size the page-fault cost does not matter.
pub const HUGEPAGE_THRESHOLD: usize = 4 << 20;

/// Asks the kernel to back the page-aligned interior of `buf` with huge pages. Best effort: a
/// refusal (old kernel, THP off) changes speed only, never behaviour.
pub fn advise_hugepages(buf: &mut [u8]) {
    if buf.len() < HUGEPAGE_THRESHOLD {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_mut_ptr() as usize;
        let aligned = (start + HUGE - 1) & !(HUGE - 1);
        let end = (start + buf.len()) & !(HUGE - 1);
        if end > aligned {
            // SAFETY: the range lies inside `buf`, which we borrow mutably; madvise only changes
            // how the kernel backs these pages, not their contents.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
}
