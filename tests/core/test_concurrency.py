"""Threads: 8 threads dumping and loading mixed payloads (arrays, frames, closures, compressed,
signed) at once, every result checked; registrations changing under them never crash an encode
(the large copies, compression and checksums run with the GIL released, so threads really do
overlap)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import freight

KEY = b"k" * 32


class Point:
    def __init__(self, x: int):
        self.x = x


class PointSerializer:
    tag = "test.concurrency.Point"
    types = (Point,)

    def serialize(self, p: Point):
        return {"x": p.x}, []

    def deserialize(self, meta, frames):
        return Point(meta["x"])


def _payloads(i: int) -> list:
    big = np.arange(300_000, dtype=np.float64) + i
    offset = i * 7
    return [
        {"i": i, "arr": big, "nested": [np.arange(i + 1), "x" * i]},
        lambda: offset,  # a closure: cloudpickle
        bytes(range(256)) * 300,  # a large bytes frame
        [Point(i), Point(i + 1)],
    ]


def _check(i: int, back: list) -> None:
    np.testing.assert_array_equal(back[0]["arr"], np.arange(300_000, dtype=np.float64) + i)
    assert back[0]["nested"][1] == "x" * i
    assert back[1]() == i * 7
    assert back[2] == bytes(range(256)) * 300
    assert [p.x for p in back[3]] == [i, i + 1]


def test_eight_threads_of_mixed_payloads_with_registrations_changing():
    codec = freight.Freight(key=KEY)
    codec.register(PointSerializer())
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        # Registrations on another layer (the global one) come and go while encodes run.
        n = 0
        while not stop.is_set():
            tag = f"test.concurrency.churn{n % 4}"
            cls = type(f"C{n % 4}", (), {})
            serializer = type("S", (), {"tag": tag, "types": (cls,), "serialize": lambda s, o: ({}, []),
                                        "deserialize": lambda s, m, f: None})()  # fmt: skip
            try:
                freight.register(serializer, replace=True)
                freight.unregister(tag)
            except Exception as exc:  # noqa: BLE001 - collected and reported
                errors.append(exc)
            n += 1

    def work(i: int) -> int:
        rounds = 0
        for round_ in range(12):
            value = _payloads(i + round_)
            compression = [None, "lz4", "zstd", "auto"][round_ % 4]
            back = codec.loads(codec.dumps(value, compression=compression))
            _check(i + round_, back)
            frames = codec.dumps_frames(value, compression=compression)
            _check(i + round_, codec.loads_frames(frames))
            rounds += 1
        return rounds

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(work, range(8)))
    finally:
        stop.set()
        churner.join()
    assert done == [12] * 8
    assert not errors, errors


def test_a_thread_meeting_a_library_while_another_registers_it_waits_for_its_serializers():
    """Thread A starts registering pandas' serializers (held midway here); the main thread dumps
    a DataFrame meanwhile. Before, A had already taken pandas off the pending list, so the main
    thread found nothing pending and pickled the frame (4 threads dumping a first DataFrame at
    once: 3 pickled). Now it waits for A's registration and uses freight's serializer."""
    from support.forging import run_isolated

    run_isolated(
        """
        import itertools, threading
        import pandas as pd
        from freight import registry

        register, calls = registry._register_module, itertools.count()
        inside, go = threading.Event(), threading.Event()

        def held(name):
            if name == "freight.serializers.pandas":
                if next(calls) == 0:
                    inside.set()
                    go.wait()
                else:
                    go.set()  # a second thread asks: let the first one on
            return register(name)

        registry._register_module = held
        frame = pd.DataFrame({"a": [1, 2, 3]})
        first = threading.Thread(target=freight.dumps, args=(frame,))
        first.start()
        inside.wait()
        payload = freight.dumps(frame)
        go.set()
        first.join()
        print("PICKLED" if freight.inspect(payload)["needs_pickle"] else "NATIVE")
        """,
        expect="NATIVE",
    )
