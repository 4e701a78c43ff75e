"""freight.integrations.multiprocessing and freight.futures with real worker processes, under each
start method: values come back equal, large ones through shared memory (the worker's array lies in
a mapping of a freight segment), writable stays writable and private, read-only stays read-only,
aliasing is kept, a value sent back unchanged is lent rather than copied, no segment is left in
/dev/shm (kill -9 included), allow_pickle=False refuses a gadget, a Manager's proxies keep working.
The task functions live here: spawned workers import this module by name."""

from __future__ import annotations

import concurrent.futures
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import freight
import freight.integrations.multiprocessing as fmp
from freight import shm

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not shm.available(), reason="no /dev/shm")]

METHODS = ["spawn", "forkserver", "fork"]
BIG = 1 << 20  # above the threshold


# -- task functions (run in the workers) -------------------------------------------------------------


def mapping_of(address: int) -> str:
    """What /proc/self/maps says backs ``address`` in this process."""
    with open("/proc/self/maps") as fh:
        for line in fh:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5].strip() if len(fields) > 5 else "[anonymous]"
    return "?"


def address(value):
    if isinstance(value, np.ndarray):
        return value.__array_interface__["data"][0]
    if isinstance(value, torch.Tensor):
        return value.data_ptr()
    if isinstance(value, pd.DataFrame):
        return value["f"].to_numpy().__array_interface__["data"][0]
    if isinstance(value, pl.DataFrame):
        return value.to_arrow().column("f").chunks[0].buffers()[1].address
    if isinstance(value, pa.Table):
        return value.column("f").chunks[0].buffers()[1].address
    raise TypeError(type(value))


def describe(value):
    """(mapping backing the value's data, writable?, the value back)."""
    writable = value.flags.writeable if isinstance(value, np.ndarray) else None
    return mapping_of(address(value)), writable, value


def echo(value):
    return value


def scribble(a):
    """Writes into the received array: the sender's copy must not change."""
    a[:10] = -1.0
    return float(a[:10].sum())


def same_object(pair):
    return pair[0] is pair[1]


def boom(x):
    raise ValueError(f"boom {x}")


def slow(x):
    time.sleep(x)
    return x


def echo_with_stats(value):
    """The value back, unchanged, and this worker's shared-memory counters before sending it."""
    return value, shm.stats()


def changed_with_stats(value):
    value[0] = -1.0  # one page copied on write: no longer the segment's
    return value, shm.stats()


def stats():
    return shm.stats()


def hold(value, seconds):
    """Keeps the received value mapped until the worker is killed."""
    time.sleep(seconds)
    return address(value)


# -- values ------------------------------------------------------------------------------------------


def values():
    rng = np.random.default_rng(0)
    n = BIG // 8
    ro = rng.random(n)
    ro.flags.writeable = False
    df = pd.DataFrame({"f": rng.random(n), "i": np.arange(n), "s": [f"r{i % 97}" for i in range(n)]})
    return {
        "numpy": rng.random(n),
        "numpy read-only": ro,
        "pandas": df,
        "polars": pl.DataFrame({"f": rng.random(n), "s": [f"r{i % 97}" for i in range(n)]}),
        "pyarrow": pa.table({"f": rng.random(n)}),
        "torch": torch.from_numpy(rng.random(n)),
    }


def equal(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and np.array_equal(a, b) and a.dtype == b.dtype
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b) and (a.dtypes == b.dtypes).all()
    if isinstance(a, (pl.DataFrame, pa.Table)):
        return type(a) is type(b) and a.equals(b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(autouse=True)
def no_segment_left():
    """Every test reads every message it sends: no freight segment may remain after it."""
    before = set(shm.segments())
    yield
    assert set(shm.segments()) <= before, "a freight segment was left in /dev/shm"


@pytest.fixture(scope="module", params=METHODS)
def pool(request):
    fmp.install()
    with mp.get_context(request.param).Pool(1) as p:
        yield p
    fmp.uninstall()


# polars (rayon) and torch threads do not survive fork in a child of a parent that used them: that is
# theirs to document (polars warns), so under fork those two stay out.
FORK_UNSAFE = ("polars", "torch")


def test_values_cross_through_shared_memory_both_ways(pool):
    before = shm.stats()
    forked = pool._ctx.get_start_method() == "fork"
    vs = {k: v for k, v in values().items() if not (forked and k in FORK_UNSAFE)}
    for name, value in vs.items():
        where, writable, back = pool.apply(describe, (value,))
        assert where.startswith(f"{shm.DIRECTORY}/{shm.PREFIX}") and where.endswith("(deleted)"), (name, where)
        assert equal(value, back), name
        if isinstance(value, np.ndarray):
            assert writable == value.flags.writeable, name
            assert back.flags.writeable == value.flags.writeable, name
        # the result came back through a segment too: it views a mapping here
        assert mapping_of(address(back)).startswith(f"{shm.DIRECTORY}/{shm.PREFIX}"), name
    after = shm.stats()
    assert after["segments"] - before["segments"] >= len(vs)
    assert after["attached"] - before["attached"] >= len(vs)


def test_nested_aliasing_and_fallbacks(pool):
    v = values()
    inner = {"t": v["numpy"] * 2} if pool._ctx.get_start_method() == "fork" else {"t": v["torch"]}
    nested = {"a": [v["numpy"], (v["pandas"], inner)], "n": 3, "s": "x"}
    assert equal(nested, pool.apply(echo, (nested,)))
    a = v["numpy"]
    assert pool.apply(same_object, ((a, a),)) is True
    objects = np.array([{"k": 1}, None, "x"] * 10, dtype=object)  # pickle's own path
    back = pool.apply(echo, (objects,))
    assert back.dtype == object and list(back) == list(objects)
    small = np.arange(10.0)  # below the threshold: in the pickle stream
    assert equal(small, pool.apply(echo, (small,)))


def test_writable_arrays_stay_private(pool):
    a = np.ones(BIG // 8)
    assert pool.apply(scribble, (a,)) == -10.0
    assert (a[:10] == 1.0).all()
    df = pool.apply(echo, (pd.DataFrame({"f": np.ones(BIG // 8)}),))
    df.iloc[0, 0] = 5.0  # pandas writes into the received (copy-on-write) block
    assert df.iloc[0, 0] == 5.0


@pytest.mark.parametrize("method", METHODS)
def test_process_pool_executor_semantics(method):
    fmp.install()
    try:
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=mp.get_context(method)) as ex:
            arrays = [np.full(BIG // 8, float(i)) for i in range(5)]
            assert all(equal(a, b) for a, b in zip(arrays, ex.map(echo, arrays, chunksize=2)))
            with pytest.raises(ValueError, match="boom 3"):
                ex.submit(boom, 3).result()
            with pytest.raises(concurrent.futures.TimeoutError):
                list(ex.map(slow, [5.0], timeout=0.2))
    finally:
        fmp.uninstall()


@pytest.mark.parametrize("method", METHODS)
def test_freight_futures_executor(method):
    from freight.futures import ProcessPoolExecutor

    weights = np.arange(BIG // 8, dtype=np.float64)

    def score(i):  # a closure carrying an array: plain pickle cannot send it
        return weights[i] * 2

    with ProcessPoolExecutor(1, mp_context=mp.get_context(method)) as ex:
        assert list(ex.map(score, [1, 2, 3], chunksize=2)) == [2.0, 4.0, 6.0]
        where, _, back = ex.submit(describe, values()["numpy"]).result()
        assert where.startswith(f"{shm.DIRECTORY}/{shm.PREFIX}")
        with pytest.raises(ValueError, match="boom 1"):
            ex.submit(boom, 1).result()


def _produce(q):
    q.put(np.full(BIG // 8, 7.0))  # the producer exits right after: the segment outlives it


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_queue_message_outlives_its_sender(method):
    fmp.install()
    try:
        ctx = mp.get_context(method)
        q = ctx.Queue()
        p = ctx.Process(target=_produce, args=(q,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        assert equal(np.full(BIG // 8, 7.0), q.get(timeout=60))
    finally:
        fmp.uninstall()


def _leftovers() -> set[str]:
    return set(shm.segments())


def test_kill_9_worker_holding_values_leaks_nothing():
    fmp.install()
    try:
        before = _leftovers()
        ctx = mp.get_context("spawn")
        with ctx.Pool(1) as p:
            pid = p.apply(os.getpid)
            pending = p.apply_async(hold, (np.ones(4 * BIG // 8), 600))
            # wait until the worker maps the segment (its maps name a deleted freight segment)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with open(f"/proc/{pid}/maps") as fh:
                    if any(shm.PREFIX in line and "(deleted)" in line for line in fh):
                        break
                time.sleep(0.05)
            else:
                pytest.fail("the worker never mapped the segment")
            assert _leftovers() == before  # unlinked as soon as it was opened
            os.kill(pid, signal.SIGKILL)
            del pending
            p.terminate()
        assert _leftovers() == before
    finally:
        fmp.uninstall()


def test_kill_9_sender_with_unread_message_leaks_nothing(tmp_path):
    """A program killed with messages never received: its resource tracker unlinks them."""
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent("""
        import glob, multiprocessing as mp, os, sys, time
        import numpy as np
        import freight.integrations.multiprocessing as fmp
        from freight import shm
        if __name__ == "__main__":
            fmp.install()
            q = mp.get_context("spawn").Queue()
            q.put(np.ones(1 << 18))          # nobody reads it
            # the feeder thread writes the segment when it pickles the message: wait for it,
            # however busy the machine is
            mine = f"{shm.DIRECTORY}/{shm.PREFIX}{os.getpid()}-*"
            deadline = time.monotonic() + 60
            while not glob.glob(mine) and time.monotonic() < deadline:
                time.sleep(0.05)
            print("ready", flush=True)
            time.sleep(600)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        mine = {n for n in _leftovers() if n.startswith(f"{shm.PREFIX}{proc.pid}-")}
        assert len(mine) == 1  # the unread message's segment
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 30
        while mine & _leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not mine & _leftovers(), "the resource tracker did not unlink the segment"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()


class Gadget:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))  # creates a file when unpickled


def _receive(q, report):
    try:
        q.get(timeout=60)
        report.put("unpickled")
    except Exception as e:  # noqa: BLE001
        report.put(f"{type(e).__name__}: {e}")


def test_allow_pickle_false_refuses_a_gadget(tmp_path):
    fmp.install(allow_pickle=False, trusted=(__name__,))
    try:
        ctx = mp.get_context("spawn")
        q, report = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=_receive, args=(q, report))
        p.start()
        target = tmp_path / "pwned"
        q.put(Gadget(str(target)))
        msg = report.get(timeout=120)
        p.join(60)
        assert msg.startswith("UnsafePayloadError") and "open" in msg, msg
        assert not target.exists()
        # freight's own values still cross
        q2 = ctx.Queue()
        q2.put(np.ones(BIG // 8))
        assert equal(np.ones(BIG // 8), q2.get(timeout=60))
    finally:
        fmp.uninstall()


def test_only_messages_holding_references_are_marked_for_the_receiver():
    # A message that holds a shared-memory reference ends with a mark after pickle's STOP, which
    # makes the receiving loads set up for reading it; a plain message ends with STOP and goes
    # straight to pickle. Both still load with plain pickle (it stops at STOP).
    import pickle
    from multiprocessing.reduction import ForkingPickler

    fmp.install()
    try:
        big = np.arange(BIG // 8)
        small = ForkingPickler.dumps((7, 3, (True, [4])))
        marked = ForkingPickler.dumps(("task", big))
        in_band = ForkingPickler.dumps(("task", np.arange(10)))  # frames in the stream: no reference
        assert bytes(small[-1:]) == pickle.STOP and bytes(in_band[-1:]) == pickle.STOP
        assert bytes(marked[-2:]) == pickle.STOP + fmp._CARRIES
        assert ForkingPickler.loads(small) == (7, 3, (True, [4]))
        assert ForkingPickler.loads(in_band)[1].tolist() == list(range(10))
        name, back = ForkingPickler.loads(marked)
        assert name == "task" and equal(big, back)
        # A marked message whose segment is gone fails as before (a RefError), not silently.
        with pytest.raises(freight.RefError):
            ForkingPickler.loads(marked)
    finally:
        fmp.uninstall()


def test_no_shared_memory_falls_back_to_the_pipe(monkeypatch):
    fmp.install()
    try:
        monkeypatch.setattr(shm, "DIRECTORY", "/nonexistent-freight-test")
        monkeypatch.setattr(shm, "_AVAILABLE", None)
        with mp.get_context("fork").Pool(1) as p:
            a = np.random.default_rng(1).random(BIG // 8)
            where, _, back = p.apply(describe, (a,))
            assert "frt-" not in where and equal(a, back)
    finally:
        fmp.uninstall()


def test_unchanged_values_come_back_lent_not_copied(pool):
    """A worker that returns what it received, unchanged, lends the segment back: no new segment,
    the parent maps the same memory; a value it wrote into is written into a new segment."""
    a = np.random.default_rng(2).random(4 * BIG // 8)
    back, before = pool.apply(echo_with_stats, (a,))
    after = pool.apply(stats)
    assert equal(a, back) and back.flags.writeable
    assert after["lent"] == before["lent"] + 1 and after["segments"] == before["segments"]
    assert mapping_of(address(back)).startswith(f"{shm.DIRECTORY}/{shm.PREFIX}")
    back[:5] = 9.0  # the parent's copy is private too
    assert (a[:5] != 9.0).all()
    df = values()["pandas"]
    back_df, before = pool.apply(echo_with_stats, (df,))
    assert equal(df, back_df) and pool.apply(stats)["lent"] == before["lent"] + 1
    changed, before = pool.apply(changed_with_stats, (a,))
    after = pool.apply(stats)
    assert changed[0] == -1.0 and a[0] != -1.0
    assert after["lent"] == before["lent"] and after["segments"] == before["segments"] + 1


def _forward(inbox, outbox):
    outbox.put(inbox.get(timeout=60))  # lent back, then this process exits before it is read


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_lender_exiting_before_the_value_is_read(method):
    """A process that lends a value on and exits before the receiver maps it leaves a copy under
    the message's fallback name first; the receiver gets the value and nothing is left."""
    fmp.install()
    try:
        ctx = mp.get_context(method)
        inbox, outbox = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=_forward, args=(inbox, outbox))
        p.start()
        a = np.random.default_rng(3).random(BIG // 8)
        inbox.put(a)
        p.join(60)
        assert p.exitcode == 0
        assert equal(a, outbox.get(timeout=60))
    finally:
        fmp.uninstall()


def _forward_and_wait(inbox, outbox):
    outbox.put(inbox.get())
    time.sleep(600)


def test_lender_killed_before_the_value_is_read():
    """A lender killed with -9 before the receiver maps the value: the receiver raises
    SharedMemoryLostError (a FreightError saying what happened), nothing is left behind."""
    from freight.shm import SharedMemoryLostError

    fmp.install()
    try:
        ctx = mp.get_context("fork")
        inbox, outbox = ctx.SimpleQueue(), ctx.SimpleQueue()  # SimpleQueue: sent when put returns
        p = ctx.Process(target=_forward_and_wait, args=(inbox, outbox))
        p.start()
        inbox.put(np.ones(BIG // 8))
        while outbox.empty():  # the message is in the pipe: the loan was made
            p.join(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.join(60)
        with pytest.raises(SharedMemoryLostError, match=f"process {p.pid}.*exited"):
            outbox.get()
    finally:
        fmp.uninstall()


def _store(shared, key, value):
    shared[key] = value
    return key


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_manager_proxies_still_work(method):
    """A Manager's proxies pickle with ForkingPickler too: a dict proxy filled by a worker holds
    the arrays, and they come back equal (through the manager process's shared memory)."""
    fmp.install()
    try:
        ctx = mp.get_context(method)
        with ctx.Manager() as manager, ctx.Pool(1) as p:
            shared = manager.dict()
            arrays = {f"a{i}": np.full(BIG // 8, float(i)) for i in range(3)}
            assert sorted(p.starmap(_store, [(shared, k, v) for k, v in arrays.items()])) == sorted(arrays)
            assert all(equal(v, shared[k]) for k, v in arrays.items())
            queue = manager.Queue()
            queue.put(arrays["a1"])
            assert equal(arrays["a1"], queue.get(timeout=60))
    finally:
        fmp.uninstall()


FORK_SCRIPT = """
import multiprocessing as mp, sys
import numpy as np
import freight.integrations.multiprocessing as fmp
from freight import shm

def roundtrip(value):
    import polars as pl, torch
    if isinstance(value, pl.DataFrame):
        return value.with_columns(g=pl.col("f") * 2)   # polars' thread pool runs here
    return value * 2                                    # and torch's

if __name__ == "__main__":
    fmp.install()
    # The workers are forked before this process touches polars or torch: their thread pools
    # start in the workers, not inherited half-started from here.
    with mp.get_context("fork").Pool(2) as pool:
        import polars as pl, torch
        df = pl.DataFrame({"f": np.arange(1 << 17, dtype=np.float64), "s": [f"r{i % 7}" for i in range(1 << 17)]})
        t = torch.arange(1 << 17, dtype=torch.float64)
        out_df, out_t = pool.map(roundtrip, [df, t], chunksize=1)
        assert out_df["g"].to_list() == (df["f"] * 2).to_list() and out_df["s"].equals(df["s"])
        assert torch.equal(out_t, t * 2)
    print("ok", shm.stats()["attached"] >= 2, flush=True)
"""


def test_fork_with_polars_and_torch(tmp_path):
    """Under fork, polars and torch values cross both ways when the parent forks its workers before
    it uses those libraries (their thread pools do not survive a fork once started: polars says so
    in the warning it gives on fork, torch in its multiprocessing notes)."""
    script = tmp_path / "fork_libs.py"
    script.write_text(FORK_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok", "True"]


def test_lendable_mappings_are_capped(monkeypatch):
    """Each lendable mapping keeps a descriptor open: past shm.LENDABLE, received values are still
    mapped but sent on by copy (in one process: ForkingPickler's dumps and loads)."""
    from multiprocessing.reduction import ForkingPickler

    fmp.install()
    try:
        a = np.random.default_rng(4).random(BIG // 8)
        received = ForkingPickler.loads(ForkingPickler.dumps(a))
        before = shm.stats()
        assert equal(a, ForkingPickler.loads(ForkingPickler.dumps(received)))
        assert shm.stats()["lent"] == before["lent"] + 1
        monkeypatch.setattr(shm, "LENDABLE", 0)
        received = ForkingPickler.loads(ForkingPickler.dumps(a))
        before = shm.stats()
        assert equal(a, ForkingPickler.loads(ForkingPickler.dumps(received)))
        after = shm.stats()
        assert after["lent"] == before["lent"] and after["segments"] == before["segments"] + 1
    finally:
        fmp.uninstall()
