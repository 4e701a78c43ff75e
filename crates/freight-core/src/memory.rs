//! Large-buffer helpers. On Linux with transparent huge pages in `madvise` mode, a fresh large
//! buffer that nobody advises costs several times a copy in page faults alone (a fault per 4 KiB
//! page instead of per 2 MiB): 64 MiB filled in 40-90 ms on ordinary pages against 9-12 ms on
//! huge pages, measured on the 2-core development VM. But advised memory is also where the kernel
//! compacts on the fault when it has no free huge page (`defrag` = `madvise`, the default): long-lived
//! workers with fragmented memory stalled large decodes for 12-80 ms (the Scaler and mpi4py
//! benchmarks). So the advice is given only when the kernel holds enough free 2 MiB blocks
//! to serve the buffer without compacting ([`huge_pages_ready`], from `/proc/buddyinfo`): a fresh
//! process on a machine with free memory gets huge pages, a fragmented one ordinary pages.

/// Below this size the page-fault cost does not matter (numpy's own threshold for its advice).
pub const HUGEPAGE_THRESHOLD: usize = 4 << 20;

/// The transparent huge page size this module reasons about (x86-64 and arm64 with 4 KiB pages).
const HUGE: usize = 2 << 20;

/// Free huge blocks kept in reserve beyond twice the need, so that the advice is not given when
/// the allocation would take the zone near its watermarks (where the kernel compacts or
/// reclaims instead of handing out a free block).
const RESERVE_BLOCKS: u64 = 16;

/// Below this size a fresh buffer is not populated ahead: its few faults cost less than the checks.
pub const POPULATE_MIN: usize = 256 << 10;

/// Whether `buf` (inside the allocation at `alloc`, the pointer the allocator returned) is
/// memory no write has touched yet, worth [`prepare_output`] or [`prepare_decoded`]: 256 KiB or
/// more, and a chunk glibc mapped for this allocation alone ([`mapped_alone`], no system call)
/// or, from [`HUGEPAGE_THRESHOLD`] up, a buffer whose last page is not resident (one `mincore`,
/// ~2.5 µs on the development VM: too dear for smaller buffers). Cheap enough to ask under the
/// GIL; the preparation itself costs about a copy, and callers run it with the GIL released.
pub fn fresh(alloc: *const u8, buf: &[u8]) -> bool {
    #[cfg(target_os = "linux")]
    {
        buf.len() >= POPULATE_MIN
            && (mapped_alone(alloc, buf.as_ptr() as usize, buf.len())
                || (buf.len() >= HUGEPAGE_THRESHOLD && !last_page_resident(buf)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (alloc, buf);
        false
    }
}

/// Prepares `buf`, a [`fresh`] buffer `dumps` is about to fill, for the writes: advised onto
/// huge pages when large and the kernel has them ready ([`huge_pages_ready`]), then populated
/// in one call ([`populate`]) instead of one page fault per 4 KiB. Best effort: a refusal (old
/// kernel, THP off) changes speed only, never behaviour.
pub fn prepare_output(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        if buf.len() >= HUGEPAGE_THRESHOLD && huge_pages_ready(buf.len()) {
            advise(buf, HUGE, libc::MADV_HUGEPAGE);
        }
        populate(buf);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// For a [`fresh`] array a decode copies into (numpy advised it for huge pages when large):
/// keeps huge pages when the kernel has them ready, else takes numpy's advice back before
/// `buf` is first touched, so that the fault never compacts (see the module's note); then
/// populates it as [`prepare_output`] does. Best effort.
pub fn prepare_decoded(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        if buf.len() >= HUGEPAGE_THRESHOLD {
            if huge_pages_ready(buf.len()) {
                advise(buf, HUGE, libc::MADV_HUGEPAGE);
            } else {
                advise(buf, page_size(), libc::MADV_NOHUGEPAGE);
            }
        }
        populate(buf);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Whether `alloc`, a pointer malloc returned, heads a chunk that glibc mapped for it alone
/// (an allocation above its mmap threshold, which glibc never reuses: the mapping is fresh, so
/// every page of the `len` bytes at address `buf` past the chunk's header faults on first write). Reads the chunk's
/// header, the 16 bytes before `alloc`, only when they lie on `alloc`'s own page (so the read
/// never leaves memory the allocation proves mapped), and trusts it only when it has exactly
/// the form glibc gives a mapped chunk: a zero alignment offset, a page-multiple size with the
/// IS_MMAPPED bit and not the arena bit, covering `buf`. Under any other allocator the header
/// does not match (or matches by chance, which costs one needless populate, never a wrong
/// result).
#[cfg(target_os = "linux")]
fn mapped_alone(alloc: *const u8, buf: usize, len: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        const IS_MMAPPED: usize = 0x2;
        const NON_MAIN_ARENA: usize = 0x4;
        let page = page_size();
        let start = alloc as usize;
        if start % page != 16 {
            return false;
        }
        let chunk = (start - 16) as *const usize;
        // SAFETY: `chunk` is the page-aligned start of the page `alloc` lies in, and `alloc`
        // points into a live allocation, so both words are mapped and readable.
        let (offset, size) = unsafe { (chunk.read(), chunk.add(1).read()) };
        let bytes = size & !0x7;
        offset == 0
            && size & IS_MMAPPED != 0
            && size & NON_MAIN_ARENA == 0
            && bytes % page == 0
            && buf >= start
            && buf.saturating_add(len) <= start - 16 + bytes
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = (alloc, buf, len);
        false
    }
}

/// Faults in the page-aligned interior of `buf` in one call (MADV_POPULATE_WRITE, Linux 5.14):
/// on the development VM a fresh page costs 2.3 µs through a write fault and 1.3 µs this way
/// (1 MiB: 593 µs against 339 µs). Only for memory known fresh: on resident pages the call
/// still walks each one (44 µs per MiB). An older kernel refuses it, and the writes fault as
/// before.
#[cfg(target_os = "linux")]
fn populate(buf: &mut [u8]) {
    advise(buf, page_size(), libc::MADV_POPULATE_WRITE);
}

/// Whether the kernel holds enough free 2 MiB blocks to back `len` bytes without compacting:
/// twice the blocks needed plus [`RESERVE_BLOCKS`], counted over every zone of
/// `/proc/buddyinfo` (one read, ~5 µs; the decision needs no clock and no state). False where
/// the file is missing or pages are not 4 KiB.
pub fn huge_pages_ready(len: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        if page_size() != 4096 {
            return false;
        }
        let need = len.div_ceil(HUGE) as u64;
        std::fs::read_to_string("/proc/buddyinfo")
            .is_ok_and(|text| free_huge_blocks(&text) >= 2 * need + RESERVE_BLOCKS)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = len;
        false
    }
}

/// Free 2 MiB blocks in a `/proc/buddyinfo` text (4 KiB pages: orders 9 and up, an order-10
/// block counting as two). Lines it cannot read count as none.
pub fn free_huge_blocks(buddyinfo: &str) -> u64 {
    buddyinfo
        .lines()
        .map(|line| {
            // "Node 0, zone   Normal   c0 c1 ... c10": the counts follow the zone's name.
            let mut words = line.split_whitespace();
            if !words.any(|w| w == "zone") || words.next().is_none() {
                return 0;
            }
            words
                .enumerate()
                .skip(9)
                .map(|(order, count)| {
                    let count: u64 = count.parse().unwrap_or(0);
                    count.saturating_mul(1 << (order - 9).min(20))
                })
                .fold(0u64, u64::saturating_add)
        })
        .fold(0u64, u64::saturating_add)
}

/// Whether the last whole page of `buf` is already in memory (heap memory the allocator
/// reuses: no fault to advise about). A fresh chunk's first page holds the allocator's header
/// and is resident either way, so the last one is the page that tells.
#[cfg(target_os = "linux")]
fn last_page_resident(buf: &[u8]) -> bool {
    let page = page_size();
    let start = (buf.as_ptr() as usize).div_ceil(page) * page;
    let last = (buf.as_ptr() as usize + buf.len()) / page * page;
    if last <= start {
        return true;
    }
    let mut vec = 0u8;
    // SAFETY: `last - page` is a page-aligned address inside `buf`; mincore writes one byte
    // per page, here one.
    let rc = unsafe { libc::mincore((last - page) as *mut libc::c_void, page, &mut vec) };
    rc == 0 && vec & 1 == 1
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize
}

/// madvise over the `align`-aligned interior of `buf`.
#[cfg(target_os = "linux")]
fn advise(buf: &mut [u8], align: usize, advice: libc::c_int) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
Node 0, zone    DMA32   2295   1304    805    366    149     58     33     19     21     16    265 \n\
Node 0, zone   Normal  10178   3723     59   3928   2624   1051   1051    108     82    271    923 \n";

    #[test]
    fn counts_free_blocks_of_order_9_and_up() {
        // DMA 1 + 3*2, DMA32 16 + 265*2, Normal 271 + 923*2
        assert_eq!(free_huge_blocks(SAMPLE), 7 + 546 + 2117);
    }

    /// A buffer from malloc, freed on drop (Rust's `Vec` may move or grow; this stays put).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    struct Malloced(*mut u8, usize);

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    impl Malloced {
        fn new(len: usize) -> Self {
            // SAFETY: plain malloc; the pointer is checked and freed once, in drop.
            let ptr = unsafe { libc::malloc(len) } as *mut u8;
            assert!(!ptr.is_null());
            Malloced(ptr, len)
        }
        fn slice(&mut self) -> &mut [u8] {
            // SAFETY: `len` bytes malloc returned, owned by self.
            unsafe { std::slice::from_raw_parts_mut(self.0, self.1) }
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    impl Drop for Malloced {
        fn drop(&mut self) {
            // SAFETY: the pointer malloc returned, freed once.
            unsafe { libc::free(self.0 as *mut libc::c_void) }
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_chunk_glibc_mapped_alone_is_recognised_and_a_heap_chunk_is_not() {
        // 64 MiB is above glibc's mmap threshold however far it has risen (32 MiB at most).
        let big = Malloced::new(64 << 20);
        let (alloc, at) = (big.0 as *const u8, big.0 as usize);
        assert!(mapped_alone(alloc, at, 64 << 20));
        // a part of the chunk is covered too, a range past its end is not
        assert!(mapped_alone(alloc, at + 4096, (64 << 20) - 4096));
        assert!(!mapped_alone(alloc, at, 72 << 20));
        // a pointer that is not the chunk's start, and a small heap chunk
        assert!(!mapped_alone(alloc.wrapping_add(4096), at + 4096, 4096));
        let small = Malloced::new(1024);
        assert!(!mapped_alone(small.0 as *const u8, small.0 as usize, 1024));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_fresh_output_is_resident_after_it_is_prepared_and_keeps_what_it_is_given() {
        let mut big = Malloced::new(64 << 20);
        let alloc = big.0 as *const u8;
        assert!(
            fresh(alloc, big.slice()),
            "a chunk glibc mapped alone is fresh"
        );
        assert!(!last_page_resident(big.slice()));
        prepare_output(big.slice());
        // kernels before 5.14 refuse the populate, and the writes fault as before
        assert!(last_page_resident(big.slice()) || !populate_supported());
        big.slice().fill(7);
        assert!(big.slice().iter().all(|&b| b == 7));
        // once written, the same buffer is fresh by its header still, but not by its pages
        assert!(last_page_resident(big.slice()));
        // above glibc's highest dynamic mmap threshold (32 MiB): a mapping of its own whatever
        // other tests freed before
        let mut decoded = Malloced::new(40 << 20);
        assert!(fresh(decoded.0 as *const u8, decoded.slice()));
        prepare_decoded(decoded.slice());
        assert!(last_page_resident(decoded.slice()) || !populate_supported());
        // small buffers are never worth it
        let small = Malloced::new(64 << 10);
        assert!(!fresh(small.0 as *const u8, &[0u8; 16]));
        drop(small);
    }

    /// Whether this kernel takes MADV_POPULATE_WRITE (Linux 5.14 and later).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn populate_supported() -> bool {
        let mut page = Malloced::new(1 << 20);
        let buf = page.slice();
        // SAFETY: madvise over memory we own; it changes no contents.
        unsafe {
            libc::madvise(
                buf.as_mut_ptr()
                    .wrapping_add(4096 - (buf.as_ptr() as usize % 4096))
                    as *mut libc::c_void,
                4096,
                libc::MADV_POPULATE_WRITE,
            ) == 0
        }
    }

    #[test]
    fn a_fragmented_machine_has_none() {
        let fragmented = "Node 0, zone   Normal  90000  40000  9000  300  20  4  1  0  0  0  0\n";
        assert_eq!(free_huge_blocks(fragmented), 0);
        assert_eq!(free_huge_blocks(""), 0);
        assert_eq!(free_huge_blocks("garbage zone\n"), 0);
    }
}
