"""Shared-memory segments written again (freight._shm_pool): a segment is reused only once no
reference names it and no reader maps it, in this process, a forked child, another program or
at the end of a loan; what a reader holds never changes under it; the pool stays within its limit
and leaves nothing behind at exit. Counted with shm.stats(), never timed."""

from __future__ import annotations

import gc
import multiprocessing as mp
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight import _shm_pool, carrier, shm
from freight.carrier.ref import Ref

pytestmark = pytest.mark.skipif(not shm.available(), reason="no /dev/shm")

N = 500_000  # 4 MB: a pooled segment (under half the pool's limit)
A, B, C = (np.full(N, float(i)) for i in (1, 2, 3))


@pytest.fixture(autouse=True)
def empty_pool():
    """Each test starts with an empty pool and leaves no reference's segment behind."""
    shm.release_pool()
    before = set(shm.segments())
    yield
    shm.release_pool()
    assert set(shm.segments()) <= before, "a freight segment was left in /dev/shm"


def _reused() -> int:
    return shm.stats()["reused"]


def _send(value, **kw):
    return carrier.put(value, carrier.SharedMemory(), **kw)


def test_a_segment_is_written_again_once_its_reader_lets_go():
    v = carrier.get(_send(A))
    before, pooled = _reused(), shm.segments(pooled=True)
    del v
    gc.collect()
    back = carrier.get(_send(B))
    np.testing.assert_array_equal(back, B)
    assert _reused() == before + 1
    assert [s for s in shm.segments(pooled=True) if s.endswith(shm.POOLED_SUFFIX)] == [
        s for s in pooled if s.endswith(shm.POOLED_SUFFIX)
    ], "no new segment was made"


def test_a_value_held_never_changes_under_its_reader():
    held = carrier.get(_send(A))
    before = _reused()
    others = [carrier.get(_send(x)) for x in (B, C, B)]
    assert _reused() == before  # every one of them needed a segment of its own
    np.testing.assert_array_equal(held, A)
    for got, want in zip(others, (B, C, B)):
        np.testing.assert_array_equal(got, want)


def test_a_reference_not_read_yet_keeps_its_segment():
    ref = _send(A)
    before = _reused()
    other = carrier.get(_send(B))
    assert _reused() == before
    np.testing.assert_array_equal(carrier.get(ref), A)
    np.testing.assert_array_equal(other, B)


def test_a_kept_reference_holds_its_segment_until_released():
    ref = _send(A, lifetime=carrier.UNTIL_RELEASED)
    v = carrier.get(ref)
    del v
    gc.collect()
    before = _reused()
    np.testing.assert_array_equal(carrier.get(_send(B)), B)
    assert _reused() == before  # its name still stands: anyone may read it again
    np.testing.assert_array_equal(carrier.get(ref), A)
    carrier.release(ref)
    gc.collect()
    np.testing.assert_array_equal(carrier.get(_send(C)), C)
    assert _reused() == before + 1


def test_a_read_once_reference_is_claimed_by_one_reader_only(monkeypatch):
    """Two readers open the same read-once segment before either claims it: one gets the value,
    the other is told it was read (never a segment its writer may reuse under it)."""
    ref = _send(A)
    key = Ref.from_bytes(bytes(ref)).key
    lock = shm._lock_shared
    seen: list = []

    def first_reader_waits(fd):
        lock(fd)
        if not seen:  # the second reader runs its whole read between the first's open and claim
            seen.append(None)
            seen.append(shm.attach(key))

    monkeypatch.setattr(shm, "_lock_shared", first_reader_waits)
    with pytest.raises(shm.SharedMemoryLostError, match="received once only"):
        shm.attach(key)
    np.testing.assert_array_equal(np.frombuffer(seen[1], dtype=np.float64)[-N:], A)


def test_a_reference_naming_a_pooled_segment_is_refused():
    v = carrier.get(_send(A))
    base = next(s for s in shm.segments(pooled=True) if s.endswith(shm.POOLED_SUFFIX))
    parsed = Ref.from_bytes(bytes(_send(B)))
    forged = Ref.build("shm", parsed.location, base, carrier.READ_ONCE, 0, parsed.size, list(parsed.frames), None, [])
    with pytest.raises(freight.RefError, match="outside the backend's namespace"):
        carrier.get(bytes(forged))
    carrier.release(parsed)
    assert base in shm.segments(pooled=True)
    np.testing.assert_array_equal(v, A)


def test_a_segment_of_another_size_is_truncated_to_the_value():
    v = carrier.get(_send(A))
    del v
    gc.collect()
    before = _reused()
    small = np.arange(N * 3 // 4, dtype=np.float64)
    np.testing.assert_array_equal(carrier.get(_send(small)), small)
    assert _reused() == before + 1


def test_the_pool_stays_within_its_limit(monkeypatch):
    monkeypatch.setattr(_shm_pool, "LIMIT", 3 * A.nbytes)
    held = [carrier.get(_send(A)) for _ in range(4)]  # all in use: two pooled, the rest written alone
    assert sum(s.size for s in _shm_pool.held()) <= _shm_pool.LIMIT
    del held
    gc.collect()
    before = _reused()
    np.testing.assert_array_equal(carrier.get(_send(B)), B)
    assert _reused() == before + 1


def test_no_pool_when_its_limit_is_zero(monkeypatch):
    monkeypatch.setattr(_shm_pool, "LIMIT", 0)
    v = carrier.get(_send(A))
    del v
    gc.collect()
    before = _reused()
    np.testing.assert_array_equal(carrier.get(_send(B)), B)
    assert _reused() == before and _shm_pool.held() == []


# -- readers in other processes --------------------------------------------------------------------


def _hold_in_forked_child(conn, parents_end, view):
    parents_end.close()  # inherited: the parent closing its own must reach this child as EOF
    conn.send("holding")
    conn.recv()  # the parent wrote again meanwhile
    conn.send(bool(np.array_equal(view, A)))


def test_a_forked_child_holding_the_mapping_keeps_the_segment():
    view = carrier.get(_send(A))
    parent, child = mp.get_context("fork").Pipe()
    p = mp.get_context("fork").Process(target=_hold_in_forked_child, args=(child, parent, view))
    p.start()
    try:
        assert parent.recv() == "holding"
        del view
        gc.collect()
        before = _reused()
        np.testing.assert_array_equal(carrier.get(_send(B)), B)
        assert _reused() == before  # the child's inherited mapping holds it
        parent.send("check")
        assert parent.recv() is True
    finally:
        parent.close()  # a child still waiting reads EOF and ends: a failure never hangs here
        p.join()
    gc.collect()
    np.testing.assert_array_equal(carrier.get(_send(C)), C)
    assert _reused() == before + 1


def _echo(conn):
    """Receives a value, sends it back (lent: its pages are not written again), lets it go when told."""
    from freight import carrier, shm

    v = carrier.get(conn.recv())
    conn.send(bytes(carrier.put(v, carrier.SharedMemory())))
    conn.recv()
    del v
    shm._settle_acknowledged()  # the parent's acknowledgement unpins the loan
    import gc

    gc.collect()
    conn.send((shm.stats()["lent"], len(shm._MAPPINGS)))
    conn.recv()


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_value_lent_back_keeps_its_segment_until_both_let_go(method):
    ctx = mp.get_context(method)
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_echo, args=(child,))
    p.start()
    try:
        parent.send(bytes(_send(A)))
        back = carrier.get(parent.recv())  # the child's mapping of this process's segment, lent
        parent.send("let go")
        assert parent.recv() == (1, 0)  # lent once, and the child maps nothing any more
        gc.collect()
        before = _reused()
        np.testing.assert_array_equal(carrier.get(_send(B)), B)
        assert _reused() == before  # this process still maps it through the loan
        np.testing.assert_array_equal(back, A)
        del back
        gc.collect()
        np.testing.assert_array_equal(carrier.get(_send(C)), C)
        assert _reused() == before + 1
        parent.send("done")
    finally:
        parent.close()  # a child still waiting reads EOF and ends: a failure never hangs here
        p.join()


PROGRAM = """
import os, sys, numpy as np
from freight import carrier, shm
v = carrier.get(carrier.put(np.ones(500_000), carrier.SharedMemory()))
del v
assert [s for s in shm.segments(pooled=True) if s.endswith(shm.POOLED_SUFFIX)], "nothing pooled"
from freight import _shm_tracker
assert len(_shm_tracker.UNUSED) == 15  # registered ahead, unused: unregistered at exit, never "leaked"
if sys.argv[1] == "kill":
    os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_the_pool_leaves_nothing_behind(how):
    before = set(shm.segments(pooled=True))
    out = subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True)
    assert out.returncode == (0 if how == "exit" else -9), out.stderr
    # at a normal exit the process unlinks its pool; killed, the program's resource tracker does
    # as the program ends (the tracker has exited once run() returns: nothing is waited for)
    assert set(shm.segments(pooled=True)) <= before
    assert "Traceback" not in out.stderr, out.stderr
    if how == "exit":  # killed, the tracker says it cleans up after the process: that is its job
        assert "leaked" not in out.stderr, out.stderr
