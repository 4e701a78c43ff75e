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

/// Asks the kernel to back the page-aligned interior of `buf` (a buffer `dumps` fills) with huge
/// pages, when it has them ready ([`huge_pages_ready`]). Best effort: a refusal (old kernel, THP
/// off) changes speed only, never behaviour.
pub fn advise_hugepages(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    if buf.len() >= HUGEPAGE_THRESHOLD && !resident(buf) && huge_pages_ready(buf.len()) {
        advise(buf, HUGE, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// For a fresh array a decode copies into (numpy advised it for huge pages when large): keeps
/// huge pages when the kernel has them ready, else takes numpy's advice back before `buf` is
/// first touched, so that the fault never compacts (see the module's note). Best effort.
pub fn advise_decoded(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    if buf.len() >= HUGEPAGE_THRESHOLD && !resident(buf) {
        if huge_pages_ready(buf.len()) {
            advise(buf, HUGE, libc::MADV_HUGEPAGE);
        } else {
            advise(buf, page_size(), libc::MADV_NOHUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
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

/// Whether the first and last pages of `buf` are already in memory (heap memory the allocator
/// reuses: no fault to advise about, and no need to read `/proc/buddyinfo`, ~5 µs, for it).
#[cfg(target_os = "linux")]
fn resident(buf: &mut [u8]) -> bool {
    let page = page_size();
    let start = (buf.as_mut_ptr() as usize).div_ceil(page) * page;
    let last = (buf.as_mut_ptr() as usize + buf.len()) / page * page;
    if last <= start {
        return false;
    }
    [start, last - page].iter().all(|&at| {
        let mut vec = 0u8;
        // SAFETY: `at` is a page-aligned address inside `buf`; mincore writes one byte per page.
        let rc = unsafe { libc::mincore(at as *mut libc::c_void, page, &mut vec) };
        rc == 0 && vec & 1 == 1
    })
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

    #[test]
    fn a_fragmented_machine_has_none() {
        let fragmented = "Node 0, zone   Normal  90000  40000  9000  300  20  4  1  0  0  0  0\n";
        assert_eq!(free_huge_blocks(fragmented), 0);
        assert_eq!(free_huge_blocks(""), 0);
        assert_eq!(free_huge_blocks("garbage zone\n"), 0);
    }
}
