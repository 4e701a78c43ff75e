"""Large decoded arrays are not advised for transparent huge pages (freight takes numpy's advice
back: in long-lived workers the kernel's compaction for it stalled decodes). Read from the
kernel's own account of the mapping, /proc/self/smaps."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import freight

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


def test_large_decoded_arrays_on_ordinary_pages():
    out = freight.loads(freight.dumps(np.arange(2 << 20, dtype=np.float64)))  # 16 MiB, copied out
    assert out.flags.owndata and out[-1] == (2 << 20) - 1
    middle = out.ctypes.data + out.nbytes // 2
    flag = _thp_eligible(middle)
    if flag is None:
        pytest.skip("this kernel's smaps has no THPeligible line")
    assert flag == 0
    # numpy's own allocation of the same size, for contrast, is advised (where the kernel allows
    # huge pages at all, 'never' making both 0, and numpy advises: it does not on old kernels or
    # with NUMPY_MADVISE_HUGEPAGE=0)
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as fh:
        mode = fh.read()
    if "[never]" not in mode and np._core.multiarray._get_madvise_hugepage():
        plain = np.empty(2 << 20)
        assert _thp_eligible(plain.ctypes.data + plain.nbytes // 2) == 1
