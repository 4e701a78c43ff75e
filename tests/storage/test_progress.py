"""Progress reports from the Rust side: saves and loads call ``progress(done, total)`` as they
go (every part or range), so that a bar can move; the reports add up to the bytes moved."""

from __future__ import annotations

import numpy as np

import freight


def test_saves_and_loads_report_every_byte(store):
    arr = np.arange(5 << 20, dtype=np.float64)  # 40 MiB: streamed in parts on every backend
    payload = freight.Freight()._dumps_parts(arr, checksum=True)
    reports: list[tuple[int, int]] = []
    store._native.put_parts("big", payload, progress=lambda done, of: reports.append((done, of)))
    stored = store.info("big")["size"]
    assert reports, "no progress reported"
    assert sum(done for done, _ in reports) == stored  # the padding between parts counts too
    assert {of for _, of in reports} == {stored}
    assert stored == payload.nbytes == len(freight.dumps(arr, checksum=True))
    loads: list[tuple[int, int]] = []
    data = store._native.get("big", progress=lambda done, of: loads.append((done, of)))
    np.testing.assert_array_equal(freight.loads(data), arr)
    if store.backend == "s3":  # read in ranges; local files are mapped, memory is one read
        assert sum(done for done, _ in loads) == stored and len(loads) > 1


def test_a_failing_progress_callback_does_not_fail_the_save(store):
    def broken(done: int, total: int) -> None:
        raise RuntimeError("display gone")

    store._native.put_parts("k", freight.Freight()._dumps_parts(np.zeros(3 << 20)), progress=broken)
    np.testing.assert_array_equal(store.load("k"), np.zeros(3 << 20))
