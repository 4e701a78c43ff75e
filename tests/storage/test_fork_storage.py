"""Stores after ``fork()``: a child uses a store its parent opened and used (large saves and
loads on the storage runtime, ranged reads of S3), and stores of its own, and finishes. The
parent's runtime threads and S3 connections do not exist in a forked child; freight builds the
child's own (see freight_core::fork). support/forking.py says how a hang fails the test.
"""

from __future__ import annotations

import pytest

from support import child_env
from support.forking import run_forked

# 48 MB values: a streamed save (> 16 MiB on S3: a multipart upload), a load in parallel ranges
# (>= 32 MiB on S3), and the codec's parallel copies.


@pytest.fixture(params=["file", "s3"])
def location(request, tmp_path):
    if request.param == "file":
        return str(tmp_path / "store"), {}
    server = request.getfixturevalue("s3_server")
    server.start()
    return f"s3://{server.bucket}/fork-{request.node.name}", server.store_options()


def test_child_saves_and_loads_after_the_parent_did(location):
    url, options = location
    steps = run_forked(
        f"""
        import os
        import numpy as np
        import freight.storage

        store = freight.storage.open({url!r}, compression="none", **{options!r})
        big = np.arange(6_000_000.0)  # 48 MB
        store.save("input", big)
        assert (store.load("input") == big).all()
        assert (store.load("input", mmap=True) == big).all() if store.url.startswith("file") else True
        print("parent", flush=True)

        pid = os.fork()
        if pid == 0:
            try:
                # The parent's store object, then a new one on the same place.
                assert (store.load("input") == big).all()
                store.save("from-child", big + 1)
                again = freight.storage.open({url!r}, **{options!r})
                assert (again.load("from-child") == big + 1).all()
                print("child", flush=True)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert (store.load("from-child") == big + 1).all()
        print("parent again", flush=True)
        """,
        env=child_env(),
    )
    assert steps == ["parent", "child", "parent again"]


def test_pool_workers_load_the_parents_input(location):
    """The report's realistic job: the parent saves and loads a 48 MB input through a store,
    fork-pool workers load it by key."""
    url, options = location
    steps = run_forked(
        f"""
        import multiprocessing as mp
        import numpy as np
        import freight.storage

        store = freight.storage.open({url!r}, **{options!r})
        store.save("input", np.arange(6_000_000.0))
        store.load("input")

        def work(i):
            return float(store.load("input")[i])

        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                print(pool.map(work, [1, 2, 3]), flush=True)
        """,
    )
    assert steps == ["[1.0, 2.0, 3.0]"]


def test_child_saves_a_key_another_thread_of_the_parent_was_saving(tmp_path):
    """With a persistent serializer, saves hold a per-key lock (freight.storage.persistent's
    key_lock) under a guard lock; a child forked while another thread held them (that thread
    does not exist in the child) still saves the key."""
    steps = run_forked(
        f"""
        import os
        import threading
        import pandas as pd
        import freight.storage
        from freight.storage import persistent

        store = freight.storage.open({str(tmp_path / "store")!r})
        store.register_persistent(persistent.PandasParquet())
        frame = pd.DataFrame({{"a": [1, 2, 3]}})
        store.save("k", frame)

        # Another thread is in the middle of a save of "k" (it holds the key's lock), and a third
        # one is entering a key's lock (it holds the guard of the table of locks).
        holding, guarding, done = threading.Event(), threading.Event(), threading.Event()

        def save_in_progress():
            with persistent.key_lock(store.url, "k"):
                holding.set()
                done.wait()

        def entering():
            with persistent._KEY_LOCKS_GUARD:
                guarding.set()
                done.wait()

        threads = [threading.Thread(target=save_in_progress), threading.Thread(target=entering)]
        threads[0].start()
        holding.wait()
        threads[1].start()
        guarding.wait()
        print("parent", flush=True)

        pid = os.fork()
        if pid == 0:
            try:
                store.save("k", frame * 2)
                store.save("other", frame)
                assert store.load("k").equals(frame * 2)
                print("child", flush=True)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        done.set()
        for thread in threads:
            thread.join()
        store.save("k", frame * 3)
        assert store.load("k").equals(frame * 3)
        print("parent again", flush=True)
        """,
    )
    assert steps == ["parent", "child", "parent again"]
