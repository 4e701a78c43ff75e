"""freight.carrier on real backends: /dev/shm, a folder, the memory store, a real redis-server
(conftest.py), and the SQLite backend of docs/carrier.md. Every lifetime leaves nothing behind and
removes nothing early; every bad reference is a RefError that says what, before anything is
fetched. No sleeps: expiry is shown with the carrier's clock moved forward, and redis's own with
its PTTL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight import carrier, shm
from freight.carrier import ref as ref_module
from support import ROOT
from support.markdown import python_blocks
from support.ports import free_port

KEY = b"carrier-test-key-0123456789abcdef"
SIGNED = freight.DEFAULT.replace(key=KEY)
BIG = np.arange(300_000, dtype=np.float64)  # 2.4 MB: over the 1 MiB default


@pytest.fixture(params=["shm", "file", "memory", "redis"])
def backend(request, tmp_path):
    if request.param == "shm":
        if not shm.available():
            pytest.skip("no /dev/shm")
        return carrier.SharedMemory()
    if request.param == "file":
        return carrier.StoreBackend(f"file://{tmp_path}/values")
    if request.param == "memory":
        return carrier.StoreBackend("memory://")
    host, port = request.getfixturevalue("redis_server")
    return carrier.RedisBackend(f"redis://{host}:{port}/0")


def _later(monkeypatch, seconds):
    now = ref_module.now_ms()
    monkeypatch.setattr(ref_module, "now_ms", lambda: now + int(seconds * 1000))


def _value():
    return {"a": BIG, "name": "x", "n": 3}


def _same(value):
    np.testing.assert_array_equal(value["a"], BIG)
    assert value["name"] == "x" and value["n"] == 3


def test_read_once(backend):
    ref = carrier.put(_value(), backend)
    assert ref.stored and ref.lifetime.kind == "read-once" and backend.exists(ref.key)
    assert len(bytes(ref)) < 400
    _same(carrier.get(bytes(ref), backend))
    assert not backend.exists(ref.key)  # removed by the read
    with pytest.raises(carrier.RefGoneError, match="read-once and was read already"):
        carrier.get(ref, backend)


def test_until_released(backend):
    ref = carrier.put(_value(), backend, lifetime=carrier.UNTIL_RELEASED)
    for _ in range(2):
        _same(carrier.get(ref, backend))
    assert backend.exists(ref.key)  # reads remove nothing
    carrier.release(ref, backend)
    carrier.release(ref, backend)  # twice: no error
    assert not backend.exists(ref.key)
    with pytest.raises(carrier.RefGoneError, match="released"):
        carrier.get(ref, backend)


def test_task_owned(backend):
    ref = carrier.put(_value(), backend, lifetime=carrier.task(ttl=3600))
    _same(carrier.get(ref, backend))
    _same(carrier.get(ref, backend))  # the task may decode its arguments twice (Celery does)
    assert backend.exists(ref.key)
    carrier.release(ref, backend)  # the task ended
    assert not backend.exists(ref.key)


def test_ttl(backend, monkeypatch):
    ref = carrier.put(_value(), backend, lifetime=carrier.ttl(60))
    _same(carrier.get(ref, backend))
    _same(carrier.get(ref, backend))
    assert backend.exists(ref.key)  # not removed early
    if isinstance(backend, carrier.RedisBackend):
        assert 0 < backend.client().pttl(ref.key) <= 60_000  # redis expires it itself
    _later(monkeypatch, 61)
    with pytest.raises(carrier.RefGoneError, match="expired"):
        carrier.get(ref, backend)
    assert not backend.exists(ref.key)  # an expired read removes it


def test_sweep_removes_only_what_expired(tmp_path, monkeypatch):
    backend = carrier.StoreBackend(f"file://{tmp_path}")
    short = carrier.put(BIG, backend, lifetime=carrier.ttl(10))
    long = carrier.put(BIG, backend, lifetime=carrier.ttl(1000))
    kept = carrier.put(BIG, backend, lifetime=carrier.UNTIL_RELEASED)
    assert carrier.sweep(backend) == 0
    _later(monkeypatch, 11)
    assert carrier.sweep(backend) == 1
    assert not backend.exists(short.key) and backend.exists(long.key) and backend.exists(kept.key)
    carrier.release(long, backend)
    carrier.release(kept, backend)
    assert list(backend.keys()) == []


def test_small_values_stay_inside_the_reference(backend):
    ref = carrier.put({"n": 1, "s": "small"}, backend)
    assert not ref.stored and ref.key == ""
    assert carrier.get(ref) == {"n": 1, "s": "small"}
    big = carrier.put(BIG, backend, threshold=10 << 20)  # a call's own threshold
    assert not big.stored
    np.testing.assert_array_equal(carrier.get(big), BIG)


def test_a_large_frame_takes_the_values_other_frames_of_a_page_or_more_with_it(backend):
    """The threshold decides whether a value leaves; once it does, its frames of COMPANION bytes
    or more are stored with the large one, and only smaller ones stay in the reference."""
    value = {"big": BIG, "page": np.arange(carrier.COMPANION // 8, dtype=np.int64),
             "under": np.arange(carrier.COMPANION // 8 - 1, dtype=np.int64)}  # fmt: skip
    ref = carrier.put(value, backend)
    kept_inline = sorted(f.length for f in ref.frames if f.inline is not None)
    stored = sorted(f.length for f in ref.frames if f.inline is None)
    assert stored == [carrier.COMPANION, BIG.nbytes]
    assert all(n < carrier.COMPANION for n in kept_inline) and (carrier.COMPANION - 8) in kept_inline
    back = carrier.get(ref, backend)
    for name, array in value.items():
        np.testing.assert_array_equal(back[name], array)
    alone = carrier.put({"page": value["page"]}, backend)  # nothing large: nothing stored
    assert not alone.stored


def test_frames_and_payloads(backend):
    frames = freight.dumps_frames(_value())
    ref = carrier.put(carrier.Frames(frames), backend, threshold=1000)
    _same(carrier.get(ref, backend))
    ref = carrier.put(carrier.Frames([freight.dumps(_value())]), backend, lifetime="until-released")
    assert len(ref.frames) == 1 and ref.frames[0][0] is None
    _same(carrier.get(ref, backend))
    carrier.release(ref, backend)


def test_signed_references(backend):
    ref = carrier.put(_value(), backend, codec=SIGNED)
    assert ref.signed
    wire = bytearray(bytes(ref))
    wire[-40] ^= 1  # a changed frame length or key byte
    with pytest.raises(carrier.RefSignatureError, match="before anything was fetched"):
        carrier.get(bytes(wire), backend, codec=SIGNED)
    with pytest.raises(carrier.RefSignatureError, match="another key"):
        carrier.get(ref, backend, codec=freight.DEFAULT.replace(key=b"another-key-0123456789abcdef"))
    with pytest.raises(carrier.RefSignatureError):
        carrier.release(bytes(wire), backend, codec=SIGNED)
    assert backend.exists(ref.key)  # nothing fetched, nothing removed
    _same(carrier.get(ref, backend, codec=freight.DEFAULT.replace(key=[b"new-key-0123456789abcdef0", KEY])))
    unsigned = carrier.put(_value(), backend, lifetime="until-released")
    with pytest.raises(carrier.RefSignatureError, match="not signed"):
        carrier.get(unsigned, backend, codec=SIGNED)
    assert backend.exists(unsigned.key)
    carrier.release(unsigned, backend)


def test_foreign_references(backend, tmp_path):
    ref = carrier.put(_value(), backend, lifetime="until-released")
    other = carrier.StoreBackend(f"file://{tmp_path}/other")
    with pytest.raises(carrier.RefError, match="open it with the backend it was put in"):
        carrier.get(ref, other)
    # a reference to a key outside the namespace: refused, and that object is left alone
    backend.put_bytes("not-the-carrier's", b"x" * 10, ttl=60)
    outside = carrier.Ref.build(
        backend.name, backend.location, "not-the-carrier's", carrier.READ_ONCE, 0, 10, [(None, 10)], None
    )
    with pytest.raises(carrier.RefError, match="outside the backend's namespace"):
        carrier.get(outside, backend)
    assert backend.exists("not-the-carrier's")
    backend.delete("not-the-carrier's")
    carrier.release(ref, backend)


def test_not_references():
    for bad in (b"", b"FREIGHT-REF", b"FREIGHT-REF\x01\x00\x00", b"\x89FRT...", bytes(100)):
        with pytest.raises(carrier.RefError):
            carrier.get(bad)
    wire = bytearray(bytes(carrier.put(1, carrier.StoreBackend("memory://"))))
    wire[11] = 3
    with pytest.raises(carrier.RefError, match="version 3 .* versions 1 to 2: upgrade freight"):
        carrier.get(bytes(wire))
    with pytest.raises(carrier.RefError, match="truncated or corrupt"):
        carrier.get(bytes(wire[:-3]).replace(b"FREIGHT-REF\x03", b"FREIGHT-REF\x01"))
    with pytest.raises(freight.OptionError):
        carrier.put(1, object())
    with pytest.raises(freight.OptionError):
        carrier.put(1, carrier.StoreBackend("memory://"), lifetime="forever")
    with pytest.raises(freight.OptionError):
        carrier.ttl(0)


def test_wire_versions(backend):
    """A reference is written in version 1 unless it needs version 2 (read-only frames, objects
    lent): readers of version 1 read every other one. Version 2 keeps each frame's flag."""
    plain = carrier.put(_value(), backend, lifetime="until-released")
    assert bytes(plain)[11] == 1
    flagged = carrier.put(carrier.Frames(freight.dumps_frames(BIG)), backend, writable=lambda i, f: i != 1)
    assert bytes(flagged)[11] == 2
    frames = carrier.get_frames(bytes(flagged), backend)
    assert frames[1].readonly and not carrier.Ref.from_bytes(bytes(flagged)).frames[0].read_only
    np.testing.assert_array_equal(freight.loads_frames(frames), BIG)
    _same(carrier.get(plain, backend))
    carrier.release(plain, backend)
    wire = bytearray(bytes(carrier.put(carrier.Frames(freight.dumps_frames(BIG)), backend, writable=False)))
    try:
        wire[-8:] = (1 << 40).to_bytes(8, "little")  # the last frame's length past its object
        with pytest.raises(carrier.RefError, match="do not lie within the objects it names"):
            carrier.get(bytes(wire), backend)
    finally:
        wire[-8:] = BIG.nbytes.to_bytes(8, "little")
        carrier.release(bytes(wire), backend)


def test_truncated_object_is_refused_whole(backend):
    ref = carrier.put(_value(), backend, lifetime="until-released")
    backend.delete(ref.key)
    backend.put_bytes(ref.key, b"\0" * 1000)
    with pytest.raises(carrier.RefError, match="truncated or replaced"):
        carrier.get(ref, backend)
    assert not backend.exists(ref.key)


def test_a_backend_that_is_gone(tmp_path):
    gone = carrier.RedisBackend(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(carrier.RefError, match="check that this process reaches it"):
        carrier.put(BIG, gone)
    ref = carrier.Ref.build("redis", gone.location, "freight-carrier:x", carrier.READ_ONCE, 0, 8, [(None, 8)], None)
    with pytest.raises(carrier.RefError, match="failed to read"):
        carrier.get(ref, gone)
    folder = carrier.StoreBackend(f"file://{tmp_path}/gone")
    ref = carrier.put(BIG, folder)
    shutil.rmtree(tmp_path / "gone")
    with pytest.raises(carrier.RefGoneError, match="is gone"):
        carrier.get(ref, folder)
    with pytest.raises(carrier.RefError, match="memory:// store, which lives in one process"):
        carrier.get(carrier.put(BIG, carrier.StoreBackend("memory://")))


@pytest.mark.skipif(not shm.available(), reason="no /dev/shm")
def test_a_full_dev_shm_leaves_nothing(monkeypatch):
    before = shm.segments()

    class Full:
        f_bavail, f_frsize = 10, 4096

    shm.release_pool()  # no segment to write again: the value needs new room
    monkeypatch.setattr(shm.os, "statvfs", lambda _: Full)
    with pytest.raises(carrier.RefError, match="no room .* --shm-size"):
        carrier.put(BIG, carrier.SharedMemory())
    assert shm.segments() == before


def test_references_cross_processes(tmp_path):
    """A reader in another process, given only the bytes, opens the backend the reference names."""
    backends = [carrier.StoreBackend(f"file://{tmp_path}")]
    if shm.available():
        backends.append(carrier.SharedMemory())
    for backend in backends:
        ref = carrier.put(_value(), backend, codec=SIGNED)
        code = (
            "import sys, freight; from freight import carrier; "
            f"v = carrier.get(bytes.fromhex(sys.argv[1]), codec=freight.DEFAULT.replace(key={KEY!r})); "
            "print(float(v['a'].sum()))"
        )
        out = subprocess.run([sys.executable, "-c", code, bytes(ref).hex()], capture_output=True, text=True, check=True)
        assert float(out.stdout) == float(BIG.sum())
        assert not backend.exists(ref.key)


def _docs_backend():
    block = next(b for b in python_blocks(ROOT / "docs" / "carrier.md") if "class SqliteBackend" in b.code)
    namespace: dict[str, object] = {"__name__": "carrier_docs"}
    exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the docs' own code
    return namespace["SqliteBackend"]


def test_the_docs_backend(tmp_path):
    """docs/carrier.md's SQLite backend, as written there: every lifetime, signing, opening from
    a reference alone, and a forged reference refused before the backend is asked anything."""
    SqliteBackend = _docs_backend()
    backend = SqliteBackend(tmp_path / "carried.db")
    ref = carrier.put(_value(), backend, codec=SIGNED)
    _same(carrier.get(bytes(ref), codec=SIGNED))  # opened from the location
    assert not backend.exists(ref.key)
    kept = carrier.put(_value(), backend, lifetime=carrier.UNTIL_RELEASED, codec=SIGNED)
    _same(carrier.get(kept, backend, codec=SIGNED))
    asked = []
    monkey = type("Counting", (SqliteBackend,), {"get": lambda self, key, **kw: asked.append(key)})
    counting = monkey(tmp_path / "carried.db")
    forged = bytearray(bytes(kept))
    forged[-1] ^= 1
    with pytest.raises(carrier.RefSignatureError):
        carrier.get(bytes(forged), counting, codec=SIGNED)
    assert asked == []
    carrier.release(kept, backend, codec=SIGNED)
    assert backend.db.execute("SELECT COUNT(*) FROM carried").fetchone() == (0,)


def test_no_segment_left_behind():
    if not shm.available():
        pytest.skip("no /dev/shm")
    mine = [s for s in shm.segments() if s.startswith(f"{shm.PREFIX}{os.getpid()}-")]
    assert mine == []
