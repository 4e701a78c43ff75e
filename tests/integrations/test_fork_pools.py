"""Process pools started with "fork" after freight worked in the parent, with and without the
integrations installed: multiprocessing.Pool, concurrent.futures.ProcessPoolExecutor, joblib's
multiprocessing backend, and a pool after a compressed ProxyStore proxy was resolved in the
parent. Every worker must answer; support/forking.py says how a hang fails the test.
"""

from __future__ import annotations

import pytest

from support.forking import run_forked

PARENT = """
import numpy as np
import freight

big = np.arange(4_000_000.0)
blob = freight.dumps(big, compression="lz4")
assert (freight.loads(blob) == big).all()  # the parent's pool has run

def work(i):
    value = freight.loads(blob)  # a large load in the worker
    return float(freight.loads(freight.dumps(value))[i])
"""

INSTALL = {
    "plain": "",
    "installed": "import freight.integrations.multiprocessing as fmp; fmp.install()",
}


@pytest.mark.parametrize("install", sorted(INSTALL))
def test_multiprocessing_pool(install):
    steps = run_forked(
        PARENT,
        INSTALL[install],
        """
if __name__ == "__main__":
    import multiprocessing as mp
    with mp.get_context("fork").Pool(2) as pool:
        print(pool.map(work, [1, 2, 3]), flush=True)
        print(float(pool.apply(np.sum, (big,))), flush=True)  # a large argument and result
""",
    )
    assert steps == ["[1.0, 2.0, 3.0]", str(float(sum(range(4_000_000))))]


@pytest.mark.parametrize("install", sorted(INSTALL))
def test_process_pool_executor(install):
    steps = run_forked(
        PARENT,
        INSTALL[install],
        """
if __name__ == "__main__":
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as pool:
        print(list(pool.map(work, [1, 2])), flush=True)
        print(pool.submit(np.negative, big).result()[5], flush=True)
""",
    )
    assert steps == ["[1.0, 2.0]", "-5.0"]


@pytest.mark.parametrize("install", ["plain", "installed"])
def test_joblib_multiprocessing_backend(install):
    setup = "" if install == "plain" else "import freight.integrations.joblib as fj; fj.install()"
    steps = run_forked(
        PARENT,
        setup,
        """
if __name__ == "__main__":
    from joblib import Parallel, delayed
    print(Parallel(n_jobs=2, backend="multiprocessing")(delayed(work)(i) for i in [1, 2]), flush=True)
""",
    )
    assert steps == ["[1.0, 2.0]"]


def test_pool_after_a_compressed_proxystore_proxy():
    pytest.importorskip("proxystore")  # a test dependency: present under make test
    steps = run_forked(
        PARENT,
        """
if __name__ == "__main__":
    import multiprocessing as mp
    import tempfile
    from concurrent.futures import ProcessPoolExecutor
    from proxystore.connectors.file import FileConnector
    from freight.integrations.proxystore import freight_store

    with tempfile.TemporaryDirectory() as folder:
        with freight_store("fork-test", FileConnector(folder), compression="lz4") as store:
            proxy = store.proxy(big)
            assert float(proxy[7]) == 7.0  # resolved (decompressed) in the parent
            with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
                print(list(pool.map(work, [3])), flush=True)
""",
    )
    assert steps == ["[3.0]"]
