"""The allocator states ``freight bench`` measures in, and the process's resident memory.

Why the allocator state matters: glibc serves a request of ``M_MMAP_THRESHOLD`` bytes or more
(128 KiB at start) with a fresh ``mmap``, whose pages are faulted in on first write and unmapped
on ``free``; below the threshold it reuses heap memory that is already resident. The threshold
is *dynamic*: freeing an mmapped block of up to 32 MiB raises it to that block's size. So
whether a 1 MiB ``pickle.dumps`` pays ~250 page faults depends on what the process happened to
free before, and a 64 KiB-16 MiB ratio measured once can swing from 0.7× to 5× (measured: numpy
1 MiB dumps, pickle-5 ÷ freight, 0.71× with the threshold raised, 5.4× without). The benchmark
therefore puts each mid size in two known states instead of leaving it to luck:

- ``warm``: the threshold raised to its ceiling (:func:`raise_mmap_threshold`), buffers of up to
  ~31 MiB reused from the heap: a long-running process that has seen large values;
- ``fresh``: a fresh child process with the threshold pinned at glibc's default
  (:func:`pin_mmap_threshold`) and the heap's free regions taken before every sample
  (:func:`drain_heap`): every buffer of 128 KiB or more is a new mapping. Pinning also
  turns the dynamic threshold off, which is the state of a Dask worker (its nanny sets
  ``MALLOC_TRIM_THRESHOLD_``, and setting any of glibc's malloc parameters does that).

Arrow keeps a memory pool of its own (mimalloc or jemalloc), which keeps its pages between
calls whatever glibc's threshold says: in the ``fresh`` state Arrow is put on the system
allocator (:func:`arrow_on_malloc`), so that its buffers are new mappings like everyone
else's. Without it, ``arrow ipc``'s ``dumps`` of 100k rows took the same 180 µs in both states
while every peer writing a ``bytes`` paid its page faults (freight 83 µs warm, 1.7 ms fresh):
the state compared a warm pool with fresh mappings.

Off glibc (macOS, musl) these calls do nothing and say so; the states are then just "this
process" and "a fresh process".

Peak memory (:func:`reset_peak`, :func:`peak_rss`) is read from ``/proc/self/status``: VmHWM is
the resident high-water mark, which writing ``5`` to ``/proc/self/clear_refs`` resets to the
current resident size (Linux 4.0 and later).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import cache

#: glibc's ``mallopt`` parameter number for the mmap threshold (malloc.h: M_MMAP_THRESHOLD)
_M_MMAP_THRESHOLD = -3
#: the bit glibc sets in a chunk's size word when the chunk is a mapping of its own
_IS_MMAPPED = 0x2
#: glibc's default threshold, and the ceiling of the dynamic one on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
DEFAULT_MMAP_THRESHOLD = 128 << 10
MMAP_THRESHOLD_MAX = 32 << 20
#: what the warm-up allocates and frees: the largest block that still raises the threshold (a
#: block's chunk must not exceed the ceiling, and the chunk is a page larger than the request)
RAISE_BLOCK = MMAP_THRESHOLD_MAX - (1 << 20)


@cache
def _libc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return libc


def glibc_version() -> str | None:
    """glibc's version when this process runs on glibc (the states below apply), else None."""
    if _libc() is None:
        return None
    return platform.libc_ver()[1] or None


def malloc_trim() -> bool:
    """Returns the heap's free memory to the system (glibc only), so that the next allocation
    faults its pages in again instead of reusing ones that an earlier call left resident."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def raise_mmap_threshold() -> bool:
    """The ``warm`` state: allocates and frees a block just under 32 MiB with the threshold
    still dynamic, which raises the threshold to ~31 MiB for the rest of the process (it only
    ever goes up, and this is its ceiling, so later frees cannot move it)."""
    libc = _libc()
    if libc is None:
        return False
    block = libc.malloc(RAISE_BLOCK)
    if not block:
        return False
    ctypes.memset(block, 1, RAISE_BLOCK)  # touched, as a real buffer would be
    libc.free(block)
    return True


def pin_mmap_threshold() -> bool:
    """The ``fresh`` state: pins the threshold at glibc's default, which also stops it from
    rising, so that it stays where a fresh process has it however many calls are timed."""
    libc = _libc()
    return libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD) == 1


#: heap chunks :func:`drain_heap` took, held (untouched) until the process ends
_DRAINED: list[int] = []


def drain_heap() -> int:
    """Keeps the ``fresh`` state fresh: takes (and holds) every free heap region of
    ``DEFAULT_MMAP_THRESHOLD`` bytes or more, so that the next large request is a new mapping.

    Pinning the threshold is not enough by itself: glibc consults it only when no free heap
    chunk fits the request, and peers that free many small objects leave holes in the heap
    that coalesce past 1 MiB. Measured with every numpy peer interleaved in one fresh child,
    a 1 MiB ``arr.copy()`` took 30 µs (a resident hole, reused) against 620 µs with one peer.
    The regions are taken in threshold-sized pieces until a piece comes from ``mmap`` (glibc
    marks such chunks in their header); they are never written, so they add no resident
    memory. Returns how many were taken (0 off glibc)."""
    libc = _libc()
    if libc is None:
        return 0
    taken = 0
    while taken < 1 << 16:
        ptr = libc.malloc(DEFAULT_MMAP_THRESHOLD)
        if not ptr:
            break
        if ctypes.c_size_t.from_address(ptr - ctypes.sizeof(ctypes.c_size_t)).value & _IS_MMAPPED:
            libc.free(ptr)
            break
        _DRAINED.append(ptr)
        taken += 1
    return taken


def arrow_on_malloc() -> None:
    """Puts Arrow's buffers on the system allocator for this process (the ``fresh`` state): at
    once when pyarrow is already imported, else through the variable pyarrow reads on import."""
    import os
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is None:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    else:
        pa.set_memory_pool(pa.system_memory_pool())


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss() -> int | None:
    """Resident bytes now (VmRSS), or None where /proc is not available."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib << 10


def peak_rss() -> int | None:
    """Resident high-water mark in bytes (VmHWM), or None where /proc is not available."""
    kib = _status_kib("VmHWM")
    return None if kib is None else kib << 10


def reset_peak() -> bool:
    """Resets VmHWM to the current resident size; False where the kernel does not allow it
    (kernels before 4.0 refuse the value 5 with EINVAL, sandboxes may refuse the file)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    # No check of VmHWM against VmRSS after the reset: both are read from per-CPU counters that
    # may lag by a few hundred KiB, and such a check turned an exact probe into a lower bound.
    return True


__all__ = [
    "DEFAULT_MMAP_THRESHOLD",
    "RAISE_BLOCK",
    "arrow_on_malloc",
    "drain_heap",
    "glibc_version",
    "malloc_trim",
    "peak_rss",
    "pin_mmap_threshold",
    "raise_mmap_threshold",
    "reset_peak",
    "rss",
]
