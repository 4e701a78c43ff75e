"""Bad references reaching the process integrations. multiprocessing, concurrent.futures and joblib
send a large value as a carrier ``Ref`` (shared-memory backend, read once) and rebuild it with one
function, ``_shared_frames.load``: a reference that is forged, foreign, read already, whose segment
is gone, or a loan naming something that is not a freight segment, is a ``RefError`` saying what and
what to do, raised before anything is mapped; a full ``/dev/shm`` sends the value through the pipe;
nothing stays in ``/dev/shm``; a process pool reports a bad result instead of hanging. The task
functions live here: forkserver workers import this module by name."""

from __future__ import annotations

import concurrent.futures
import multiprocessing as mp
import os
import pickle
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import freight
import freight.integrations.multiprocessing as fmp
from freight import _shm_tracker, carrier, shm
from freight.carrier.ref import Frame, Ref
from freight.futures import _Parcel
from freight.integrations import _shared_frames

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not shm.available(), reason="no /dev/shm")]

BIG = np.arange(1 << 17, dtype=np.float64)  # 1 MiB: over the process pools' threshold


@pytest.fixture(autouse=True)
def no_segment_left():
    fmp.install()
    before = set(shm.segments())
    yield
    assert set(shm.segments()) <= before, "a freight segment was left in /dev/shm"


def _sent(value=BIG):
    """What the installed ForkingPickler's override makes of ``value``: (load, reference, zero_copy)."""
    load, (ref, zero_copy) = fmp.reduce(value)
    assert load is _shared_frames.load and carrier.is_ref(ref)
    return load, ref, zero_copy


def _changed(ref: Ref, **fields) -> bytes:
    """``ref`` with some fields replaced (what a forger can write: it has no key)."""
    f = {"backend": ref.backend, "location": ref.location, "key": ref.key, "objects": ref.objects} | fields
    built = Ref.build(f["backend"], f["location"], f["key"], ref.lifetime, ref.expires, ref.size, ref.frames, None,
                      f["objects"])  # fmt: skip
    return bytes(built)


def test_the_wire_form_is_a_reference_with_writable_flags():
    _, ref, _ = _sent(BIG)
    parsed = Ref.from_bytes(ref)
    assert parsed.backend == "shm" and parsed.lifetime == carrier.READ_ONCE and parsed.key in shm.segments()
    assert [f.read_only for f in parsed.frames if f.inline is None] == [False]
    back = pickle.loads(pickle.dumps(_shared_frames.load(ref, False)))
    np.testing.assert_array_equal(back, BIG)
    read_only = BIG.copy()
    read_only.flags.writeable = False
    load, ref, zero_copy = _sent(read_only)
    assert [f.read_only for f in Ref.from_bytes(ref).frames if f.inline is None] == [True]
    assert not load(ref, zero_copy).flags.writeable


def test_a_message_is_read_once():
    data = bytes(ForkingPickler.dumps(BIG))
    np.testing.assert_array_equal(pickle.loads(data), BIG)
    with pytest.raises(freight.RefGoneError, match="read-once and was read already"):
        pickle.loads(data)


def test_a_segment_gone():
    load, ref, zero_copy = _sent()
    shm.discard(Ref.from_bytes(ref).key)  # /dev/shm cleaned, or the program that sent it ended
    with pytest.raises(freight.RefGoneError, match="is gone: .* put it again"):
        load(ref, zero_copy)


def test_forged_and_foreign_references_read_and_remove_nothing():
    load, ref, zero_copy = _sent()
    parsed = Ref.from_bytes(ref)
    try:
        for forged, says in [
            (b"not a reference", "not a freight carrier reference"),
            (ref[:-5], "truncated or corrupt"),
            (_changed(parsed, location="shm://another-boot"), "names the shm backend at shm://another-boot"),
            (_changed(parsed, backend="store", location="file:///tmp"), "names the store backend"),
            (_changed(parsed, key="frt-../../etc/passwd"), "outside the backend's namespace"),
            (_changed(parsed, key="someone-elses-segment"), "outside the backend's namespace"),
        ]:
            with pytest.raises(freight.RefError, match=says):
                load(forged, zero_copy)
            assert parsed.key in shm.segments()  # refused before anything was read or removed
    finally:
        np.testing.assert_array_equal(load(ref, zero_copy), BIG)


def test_the_older_message_form_is_refused_clearly():
    """Before the carrier, the reduction carried (header, parts, sources, writable, zero_copy, order)."""
    with pytest.raises(freight.RefError, match="older freight .* same freight version"):
        _shared_frames.load(b"header", [None], [("new", "frt-1-2", [(0, 8)])], [True], False, [0])


def test_a_forged_loan_maps_nothing_but_a_freight_segment(tmp_path):
    """A loan names a process's descriptor: one naming a file outside /dev/shm (here this
    process's own open file, with its true device and inode) is refused, and so is a loan name
    that is not one."""
    load, ref, zero_copy = _sent()
    parsed = Ref.from_bytes(ref)
    try:
        with open(tmp_path / "secret", "wb+") as f:
            f.write(b"s" * 4096)
            f.flush()
            st = os.fstat(f.fileno())
            loan = f"{shm.PREFIX}{os.getpid()}-abc.lent-{f.fileno()}-{st.st_dev}-{st.st_ino}-00"
            frames = [parsed.frames[0], Frame(None, 4096, 1, 0, False)]
            forged = Ref.build("shm", parsed.location, "", carrier.READ_ONCE, 0, 0, frames, None, [(loan, 4096)])
            with pytest.raises(freight.RefGoneError, match=f"process {os.getpid()}, which sent this value"):
                load(bytes(forged), zero_copy)
        with pytest.raises(freight.RefError, match="outside the backend's namespace"):
            load(_changed(parsed, objects=((f"{shm.PREFIX}1-2.lent-x", 64),)), zero_copy)
    finally:
        load(ref, zero_copy)


def test_a_full_dev_shm_sends_through_the_pipe(monkeypatch):
    class Full:
        f_bavail, f_frsize = 1, 4096

    shm.release_pool()  # no segment to write again: every value needs new room
    monkeypatch.setattr(shm.os, "statvfs", lambda _: Full)
    before = shm.stats()["fallbacks"]
    for value in (BIG, _Parcel(BIG)):  # multiprocessing / joblib, and freight.futures
        data = ForkingPickler.dumps(value)
        assert len(data) > BIG.nbytes  # the frames are in the message
        np.testing.assert_array_equal(pickle.loads(data), BIG)
    assert shm.stats()["fallbacks"] == before + 2


# -- in a real pool: the error reaches the caller -----------------------------------------------------


class _Gone:
    """A result whose segment is removed before the parent reads it."""

    def __reduce__(self):
        load, ref, zero_copy = _sent()
        shm.discard(Ref.from_bytes(ref).key)
        return (load, (ref, zero_copy))


def gone(_):
    return _Gone()


def echo(x):
    return x


@pytest.mark.parametrize("allow_pickle", [True, False])
def test_a_multiprocessing_pool_reports_a_reference_gone_instead_of_hanging(allow_pickle):
    """A Pool's worker and result threads stop at any error while unpickling (map() would then wait
    for ever): a task or result whose reference cannot be read becomes that error, for the caller."""
    fmp.install(allow_pickle=allow_pickle, trusted=(__name__,))
    try:
        with mp.get_context("forkserver").Pool(1) as pool:
            with pytest.raises(freight.RefGoneError, match="is gone"):
                pool.apply(echo, (_Gone(),))  # a task: the worker cannot read its argument
            with pytest.raises(freight.RefGoneError, match="is gone"):
                pool.apply(gone, (0,))  # a result: the parent cannot read it
            with pytest.raises(freight.RefGoneError, match="is gone"):
                pool.map(gone, [0, 1], chunksize=1)
            np.testing.assert_array_equal(pool.apply(echo, (BIG,)), BIG)  # and the pool still works
    finally:
        fmp.install()


def test_an_executor_reports_a_reference_gone_instead_of_hanging():
    ctx = mp.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as ex:
        with pytest.raises(BrokenProcessPool) as info:
            ex.submit(gone, 0).result()
    assert "RefGoneError" in str(info.value.__cause__) and "is gone" in str(info.value.__cause__)


def test_a_received_value_sent_on_unchanged_is_lent_not_written():
    load, ref, zero_copy = _sent()
    received = load(ref, zero_copy)
    before = shm.stats()
    again, lent, _ = _sent(received)
    parsed = Ref.from_bytes(lent)
    assert parsed.objects and not parsed.size  # names the received segment; nothing was written
    assert shm.stats()["segments"] == before["segments"] and shm.stats()["lent"] == before["lent"] + 1
    np.testing.assert_array_equal(again(lent, zero_copy), BIG)
    received[0] = 7  # a page written is copied on write: no longer the segment's, so written again
    _, written, _ = _sent(received)
    assert Ref.from_bytes(written).size and not Ref.from_bytes(written).objects
    assert load(written, zero_copy)[0] == 7


def test_only_the_frames_whose_pages_were_written_are_written_again():
    """Two arrays in one received segment: the one written into (its pages copied on write) is
    written into a new segment, the other is still lent from the received one."""
    pd = pytest.importorskip("pandas")
    n = 1 << 17
    frame = pd.DataFrame({"a": np.arange(n, dtype=np.float64), "b": np.arange(n, dtype=np.int64)})
    load, ref, zero_copy = _sent(frame)
    received = load(ref, zero_copy)
    received.loc[0, "a"] = -1.0  # pandas writes into its float64 block, in place
    _, again, _ = _sent(received)
    parsed = Ref.from_bytes(again)
    assert parsed.objects and parsed.size  # one frame lent, one written
    stored = [f for f in parsed.frames if f.inline is None]
    assert sorted((f.source > 0, f.length) for f in stored) == [(False, n * 8), (True, n * 8)]
    back = load(again, zero_copy)
    assert back["a"][0] == -1.0 and back["b"].equals(frame["b"]) and (back["a"][1:] == frame["a"][1:]).all()


def test_freight_futures_reports_a_reference_gone_instead_of_hanging():
    from freight.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=mp.get_context("forkserver")) as ex:
        with pytest.raises(BrokenProcessPool) as info:
            ex.submit(gone, 0).result()
    assert "RefGoneError" in str(info.value.__cause__)


def test_joblib_reports_a_reference_gone_instead_of_hanging():
    joblib = pytest.importorskip("joblib")
    import freight.integrations.joblib as fj

    fj.install()
    # One task: with two, the pool breaks at the first bad result and loky kills the other worker,
    # possibly between writing its segment and discarding it (``_Gone``'s own doing, not freight's),
    # which would leave that segment to the resource tracker at exit, after this test's check.
    with pytest.raises(joblib.externals.loky.process_executor.BrokenProcessPool) as info:
        joblib.Parallel(n_jobs=2)([joblib.delayed(gone)(0)])
    assert "RefGoneError" in "".join(str(e) for e in (info.value, info.value.__cause__))


def test_received_segments_are_unregistered_by_the_next_message():
    """The tracker hears of a received segment with this process's next message (one wake-up
    instead of two): ForkingPickler.dumps sends what loads held back, whatever it pickles."""
    received = ForkingPickler.loads(ForkingPickler.dumps(BIG))
    assert np.array_equal(received, BIG)
    assert len(_shm_tracker.DEFERRED) == 1 and _shm_tracker.DEFERRED[0].startswith("UNREGISTER:/frt-")
    ForkingPickler.dumps(1)
    assert _shm_tracker.DEFERRED == []


POOL_PROGRAM = """
import numpy as np, multiprocessing as mp
import freight.integrations.multiprocessing as fmp


def total(a):
    return float(a.sum())


if __name__ == "__main__":
    fmp.install()
    with mp.get_context("forkserver").Pool(2) as pool:   # terminate() on exit: workers get SIGTERM
        print(pool.map(total, [np.ones(1 << 17)] * 6, chunksize=1))
"""


def test_pool_terminated_after_its_results_leaves_the_tracker_nothing(tmp_path):
    """A worker's held-back unregistrations are sent before its result: a pool terminated as soon as
    it has the results (``with Pool(...)``) leaves no gone segment registered, which the tracker
    would report as leaked when the program ends."""
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text(POOL_PROGRAM)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == str([float(1 << 17)] * 6)
    assert "leaked" not in out.stderr and "resource_tracker" not in out.stderr, out.stderr[-3000:]
