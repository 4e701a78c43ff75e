//! Large-buffer helpers. On Linux with transparent huge pages in `madvise` mode, a fresh large
//! buffer that nobody advises costs several times a copy in page faults alone (a fault per 4 KiB
//! page instead of per 2 MiB); numpy advises its large allocations, and so must every large buffer
//! freight fills.

/// Below this size the page-fault cost does not matter.
pub const HUGEPAGE_THRESHOLD: usize = 4 << 20;

/// Asks the kernel to back the page-aligned interior of `buf` with huge pages. Best effort: a
/// refusal (old kernel, THP off) changes speed only, never behaviour.
pub fn advise_hugepages(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    advise(buf, 2 << 20, libc::MADV_HUGEPAGE);
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Takes back a huge-page advice (numpy's, on the arrays a decode copies into) before `buf` is
/// first touched. Where the kernel compacts memory on a fault for advised regions, long-lived
/// workers with fragmented memory stalled large decodes unpredictably, for up to several times
/// what ordinary pages steadily take (the Scaler and mpi4py benchmarks; figures in
/// docs/ARCHITECTURE.md, "Frames and copies"); the `bytes` that `dumps` fills keep their advice,
/// measured better there. Best effort, like [`advise_hugepages`].
pub fn advise_ordinary_pages(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        advise(buf, page, libc::MADV_NOHUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// madvise over the `align`-aligned interior of `buf`, when it is `HUGEPAGE_THRESHOLD` or more.
#[cfg(target_os = "linux")]
fn advise(buf: &mut [u8], align: usize, advice: libc::c_int) {
    if buf.len() < HUGEPAGE_THRESHOLD {
        return;
    }
    let start = buf.as_mut_ptr() as usize;
    let aligned = (start + align - 1) & !(align - 1);
    let end = (start + buf.len()) & !(align - 1);
    if end > aligned {
        // SAFETY: the range lies inside `buf`, which we borrow mutably; madvise only changes how
        // the kernel backs these pages, not their contents.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, end - aligned, advice);
        }
    }
}
