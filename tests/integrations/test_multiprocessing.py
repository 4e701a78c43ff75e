"""freight.integrations.multiprocessing and freight.futures with real worker processes, under each
start method: values come back equal, large ones through shared memory (the worker's array lies in
a mapping of a freight segment), writable stays writable and private, read-only stays read-only,
aliasing is kept, no segment is left in /dev/shm (kill -9 included), allow_pickle=False refuses a
gadget. The task functions live here: spawned workers import this module by name."""

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
