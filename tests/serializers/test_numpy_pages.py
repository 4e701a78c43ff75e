"""Large decoded arrays keep transparent huge pages only when the kernel has free ones ready:
where it would have to compact memory for them (long-lived workers with fragmented memory stalled
there), freight takes numpy's advice back; in a fresh process on a machine with free memory, huge
pages halve the copy. Read from the kernel's own account of the mapping, /proc/self/smaps."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import freight
from freight import _freight

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and smaps are Linux's")


def _thp_eligible(address: int) -> int | None:
    """The ``THPeligible`` flag of the mapping holding ``address`` (None when the kernel does not say)."""
    inside = False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "THPeligible:":
                return int(line.split()[1])
    return None


def _thp_mode() -> str:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
        return fh.read()


@pytest.mark.skipif(not hasattr(_freight, "_huge_pages_ready"), reason="needs the testing build")
def test_large_decoded_arrays_keep_huge_pages_only_when_the_kernel_has_them_ready():
    # 40 MiB, copied out: above glibc's largest mmap threshold, so a fresh mapping (heap memory
    # already resident is left as it is: no fault to advise about)
    n = 5 << 20
    payload = freight.dumps(np.arange(n, dtype=np.float64))
    before = _freight._huge_pages_ready(8 * n)
    out = freight.loads(payload)
    after = _freight._huge_pages_ready(8 * n)
    assert out.flags.owndata and out[-1] == n - 1
    if before != after:
        pytest.skip("the machine's free huge pages changed during the decode")
    flag = _thp_eligible(out.ctypes.data + out.nbytes // 2)
    if flag is None:
        pytest.skip("this kernel's smaps has no THPeligible line")
    if not before:
        assert flag == 0  # numpy's advice taken back: ordinary pages, never a compaction
    elif "[never]" not in _thp_mode():
        assert flag == 1


def test_small_decoded_arrays_are_left_as_numpy_makes_them():
    out = freight.loads(freight.dumps(np.arange(1 << 10, dtype=np.float64)))
    assert out.flags.owndata and out[-1] == (1 << 10) - 1
