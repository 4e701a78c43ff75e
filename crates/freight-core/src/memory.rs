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
/// huge pages when large and the kernel has them ready ([`huge_pages_ready`]), else populated
/// in one call ([`populate`]) instead of one page fault per 4 KiB. Huge pages are left to
/// fault as the copy reaches them: populated ahead, they are zeroed long before the copy
/// writes them, out of cache (64 MiB: 7.5-7.9 ms against 6.3-6.6 ms; on 4 KiB pages populating
/// wins, 29 against 43 ms). Best effort: a refusal (old kernel, THP off) changes speed only,
/// never behaviour.
pub fn prepare_output(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        if buf.len() >= HUGEPAGE_THRESHOLD && huge_pages_ready(buf.len()) {
            advise(buf, HUGE, libc::MADV_HUGEPAGE);
            populate_outside_huge(buf);
        } else {
            populate(buf);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// For a [`fresh`] array a decode copies into (numpy advised it for huge pages when large):
/// keeps huge pages when the kernel has them ready, else takes numpy's advice back before
/// `buf` is first touched, so that the fault never compacts (see the module's note), and
/// populates what stays on ordinary pages, as [`prepare_output`] does. Best effort.
pub fn prepare_decoded(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        if buf.len() >= HUGEPAGE_THRESHOLD && huge_pages_ready(buf.len()) {
            advise(buf, HUGE, libc::MADV_HUGEPAGE);
            populate_outside_huge(buf);
            return;
        }
        if buf.len() >= HUGEPAGE_THRESHOLD {
            advise(buf, page_size(), libc::MADV_NOHUGEPAGE);
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

/// Faults in the page-aligned interior of `buf` (MADV_POPULATE_WRITE, Linux 5.14): on the
/// development VM a fresh page costs 2.3 µs through a write fault and 1.3 µs this way (1 MiB:
/// 593 µs against 339 µs). From the size where copies run on every core
/// ([`crate::checksum::PARALLEL_MIN`]), the pages are faulted in on every core too, in pieces
/// of 2 MiB multiples: the copy's own faults used to be spread that way. Only for memory known
/// fresh: on resident pages the call still walks each one (44 µs per MiB). An older kernel
/// refuses it, and the writes fault as before.
#[cfg(target_os = "linux")]
fn populate(buf: &mut [u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 4 << 20;
    if buf.len() < crate::checksum::PARALLEL_MIN {
        advise(buf, page_size(), libc::MADV_POPULATE_WRITE);
        return;
    }
    crate::parallel::run(|| {
        buf.par_chunks_mut(PIECE)
            .for_each(|piece| advise(piece, page_size(), libc::MADV_POPULATE_WRITE))
    });
}

/// Populates the parts of `buf` outside its 2 MiB-aligned interior (up to 2 MiB of ordinary
/// pages at each end, which the huge-page advice does not cover). A 4 MiB buffer that is not
/// 2 MiB-aligned has one huge page and ~512 ordinary ones: populating those took a fresh
/// process's 4 MiB `dumps` from 1.28 to 0.89 ms.
#[cfg(target_os = "linux")]
fn populate_outside_huge(buf: &mut [u8]) {
    let start = buf.as_ptr() as usize;
    let head = ((start + HUGE - 1) & !(HUGE - 1)) - start;
    let tail = (start + buf.len()) & (HUGE - 1);
    if head + tail >= buf.len() {
        populate(buf);
        return;
    }
    let len = buf.len();
    let (front, rest) = buf.split_at_mut(head);
    populate(front);
    populate(&mut rest[len - head - tail..]);
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
    fn a_fresh_buffer_is_recognised_populated_and_keeps_what_it_is_given() {
        let mut big = Malloced::new(64 << 20);
        let alloc = big.0 as *const u8;
        assert!(
            fresh(alloc, big.slice()),
            "a chunk glibc mapped alone is fresh"
        );
        assert!(!last_page_resident(big.slice()));
        // ordinary pages are populated ahead (on every core at this size); kernels before 5.14
        // refuse it, and the writes fault as before
        populate(big.slice());
        assert!(last_page_resident(big.slice()) || !populate_supported());
        big.slice().fill(7);
        assert!(big.slice().iter().all(|&b| b == 7));
        // once written, the buffer is fresh by its header still, but not by its pages
        assert!(last_page_resident(big.slice()));
        // whichever way the kernel's huge pages go, a prepared buffer keeps what is written
        for prepare in [prepare_output as fn(&mut [u8]), prepare_decoded] {
            let mut buf = Malloced::new(40 << 20);
            assert!(fresh(buf.0 as *const u8, buf.slice()));
            prepare(buf.slice());
            buf.slice().fill(3);
            assert!(buf.slice().iter().all(|&b| b == 3));
        }
        // small buffers are never worth it
        assert!(!fresh(big.0 as *const u8, &big.slice()[..64 << 10]));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn only_the_ends_outside_the_huge_page_interior_are_populated() {
        if !populate_supported() {
            return; // a kernel before 5.14: nothing is populated at all
        }
        let mut buf = Malloced::new(40 << 20);
        let slice = buf.slice();
        // malloc's mapping starts 16 bytes into a page: never 2 MiB-aligned, so both ends exist
        populate_outside_huge(slice);
        let page = page_size();
        let resident = |at: usize| {
            let at = at / page * page;
            let mut vec = 0u8;
            // SAFETY: a page-aligned address inside the buffer; mincore writes one byte.
            unsafe { libc::mincore(at as *mut libc::c_void, page, &mut vec) == 0 && vec & 1 == 1 }
        };
        let start = slice.as_ptr() as usize;
        let end = start + slice.len();
        let interior = (start + HUGE - 1) & !(HUGE - 1);
        // (an end shorter than a page shares its page with the interior: nothing to see there)
        if interior - start >= page {
            assert!(
                resident(interior - page),
                "the last page before the interior"
            );
        }
        if end % HUGE >= page {
            assert!(resident(end - page), "the last page");
        }
        assert!(
            !resident(interior + (8 << 20)),
            "a page well inside the interior"
        );
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
