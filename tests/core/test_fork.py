"""A child made by ``fork()`` after freight used its thread pool in the parent finishes its own
large calls (it used to wait forever on the parent's pool threads, which fork does not copy).

Each case does one kind of large work in the parent (a parallel copy, checksums, compression,
decompression), then forks, and the child does the same kinds of work. See support/forking.py
for how a hang fails the test.
"""

from __future__ import annotations

import pytest

from support.forking import run_forked

# Large enough for every parallel path: copies and checksums from 8 MiB, compressed frames in
# blocks of 1 MiB, payloads of several frames copied side by side.
PARENT_WORK = {
    "dumps": "freight.dumps(np.zeros(4_000_000))",
    "loads": "freight.loads(freight.dumps(np.zeros(4_000_000)))",
    "checksums": "freight.loads(freight.dumps(np.arange(4_000_000.0), checksum=True))",
    "compressed": "freight.loads(freight.dumps(np.zeros(4_000_000), compression='lz4'))",
    "frames": "freight.loads(freight.dumps([np.zeros(2_000_000), np.ones(2_000_000)]))",
    # a string column over 8 MiB: its offsets and UTF-8 are checked on the pool
    "arrow strings": "freight.loads_frames(freight.dumps_frames(strings()), zero_copy=True)",
    # dict keys go through the process's key cache (a lock the child must find free)
    "dict keys": "freight.loads(freight.dumps([{'id': i, 'name': str(i)} for i in range(1000)]))",
}

CHILD_WORK = """
def child_work():
    a = np.arange(4_000_000.0)
    assert (freight.loads(freight.dumps(a)) == a).all()
    assert (freight.loads(freight.dumps(a, checksum=True)) == a).all()
    assert (freight.loads(freight.dumps(a, compression="zstd")) == a).all()
    assert (freight.loads(freight.dumps([a, a + 1]))[1] == a + 1).all()
    assert freight.loads(blob).sum() == 0
    assert freight.loads(freight.dumps({"id": 1, "tags": {"a": 2}})) == {"id": 1, "tags": {"a": 2}}
    table = strings()
    assert freight.loads_frames(freight.dumps_frames(table), zero_copy=True).equals(table)
"""

# 12 MB of text in one string column
STRINGS = """
def strings():
    import pyarrow as pa

    return pa.table({"s": pa.array(["item-%07d" % i for i in range(1_000_000)])})
"""


@pytest.mark.parametrize("work", sorted(PARENT_WORK))
def test_os_fork_child_finishes_large_calls(work):
    steps = run_forked(
        STRINGS,
        f"""
        import os
        import numpy as np
        import freight
        blob = freight.dumps(np.zeros(4_000_000), compression="lz4")
        {PARENT_WORK[work]}
        print("parent", flush=True)
        """,
        CHILD_WORK,
        """
        pid = os.fork()
        if pid == 0:
            try:
                child_work()
                print("child", flush=True)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        child_work()  # and the parent's own pool still works
        print("parent again", flush=True)
        """,
    )
    assert steps == ["parent", "child", "parent again"]


def test_grandchild_finishes_too():
    """Each fork generation builds its own pool: a child's child is no different."""
    steps = run_forked(
        """
        import os
        import numpy as np
        import freight
        blob = freight.dumps(np.zeros(4_000_000))
        def big():
            return freight.loads(freight.dumps(np.arange(4_000_000.0), compression="lz4")).sum()
        big()
        pid = os.fork()
        if pid == 0:
            big()
            pid2 = os.fork()
            if pid2 == 0:
                print("grandchild", big() > 0, flush=True)
                os._exit(0)
            os.waitpid(pid2, 0)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent", flush=True)
        """
    )
    assert steps == ["grandchild True", "parent"]


def test_the_issues_pool_example():
    """The example of the report: a fork pool after one large dumps in the parent."""
    steps = run_forked(
        """
        import multiprocessing as mp
        import numpy as np
        import freight
        blob = freight.dumps(np.zeros(4_000_000))
        def f(_):
            return float(freight.loads(blob).sum())
        if __name__ == "__main__":
            with mp.get_context("fork").Pool(1) as p:
                print(p.map(f, [0, 1]), flush=True)
        """
    )
    assert steps == ["[0.0, 0.0]"]
