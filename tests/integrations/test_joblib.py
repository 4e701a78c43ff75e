"""freight.integrations.joblib with real loky workers: values come back equal and through shared
memory, joblib's memmapping of numpy arguments still works, scikit-learn gives the same scores."""

from __future__ import annotations

import numpy as np
import pytest

from freight import shm

joblib = pytest.importorskip("joblib")
pd = pytest.importorskip("pandas")

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(not shm.available(), reason="no /dev/shm")]

BIG = 1 << 20


def mapping_of(address: int) -> str:
    with open("/proc/self/maps") as fh:
        for line in fh:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5].strip() if len(fields) > 5 else "[anonymous]"
    return "?"


def where_frame(df):
    return mapping_of(df["f"].to_numpy().__array_interface__["data"][0]), df


def where_array(a):
    return mapping_of(a.__array_interface__["data"][0]), float(a.sum())


def make(n):
    return np.full(n, 3.0)


@pytest.fixture(scope="module")
def installed():
    from joblib.externals.loky import get_reusable_executor

    import freight.integrations.joblib as fj

    get_reusable_executor().shutdown(wait=True)  # workers started before install keep pickle's way
    before = set(shm.segments())
    fj.install()
    yield
    get_reusable_executor().shutdown(wait=True)
    assert set(shm.segments()) <= before, "a freight segment was left in /dev/shm"


def test_dataframes_cross_through_shared_memory(installed):
    rng = np.random.default_rng(0)
    frames = [pd.DataFrame({"f": rng.random(BIG // 8), "s": [f"r{i % 7}" for i in range(BIG // 8)]}) for _ in range(2)]
    out = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(where_frame)(df) for df in frames)
    for df, (where, back) in zip(frames, out):
        assert where.startswith(f"{shm.DIRECTORY}/{shm.PREFIX}"), where
        assert df.equals(back) and (df.dtypes == back.dtypes).all()
        # results come back through a segment as well
        address = back["f"].to_numpy().__array_interface__["data"][0]
        assert mapping_of(address).startswith(f"{shm.DIRECTORY}/{shm.PREFIX}")


def echo(x):
    return x


def test_numpy_arguments_keep_joblibs_memmapping_results_take_freight(installed):
    a = np.ones(4 * BIG // 8)
    ((where, total),) = joblib.Parallel(n_jobs=2, backend="loky", max_nbytes="1M")(
        joblib.delayed(where_array)(x) for x in [a]
    )
    assert total == a.sum()
    assert shm.PREFIX not in where  # joblib memory-mapped it from its temporary folder
    # numpy results, which joblib would pipe, come back through shared memory, writable
    back = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(make)(n) for n in [BIG // 8, 10])
    assert (back[0] == 3.0).all() and (back[1] == 3.0).all() and back[0].flags.writeable
    assert mapping_of(back[0].__array_interface__["data"][0]).startswith(f"{shm.DIRECTORY}/{shm.PREFIX}")
    # a joblib memmap echoed back arrives as a plain array through shared memory too
    (echoed,) = joblib.Parallel(n_jobs=2, backend="loky", max_nbytes="1M")(joblib.delayed(echo)(x) for x in [a])
    assert type(echoed) is np.ndarray and np.array_equal(a, echoed)
    assert mapping_of(echoed.__array_interface__["data"][0]).startswith(f"{shm.DIRECTORY}/{shm.PREFIX}")


def test_users_own_memmaps_stay_joblibs(installed, tmp_path):
    """An array backed by the user's own np.memmap goes by file name both ways (r+ shared writes)."""
    m = np.memmap(str(tmp_path / "own.mmap"), dtype=np.float64, mode="w+", shape=(BIG // 8,))
    m[:] = 2.0
    m.flush()
    ((where, total),) = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(where_array)(x) for x in [m])
    assert total == m.sum() and where.endswith("own.mmap")
    (back,) = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(echo)(x) for x in [m])
    assert isinstance(back, np.memmap) and str(back.filename) == str(tmp_path / "own.mmap")


def test_cross_val_score_same_scores(installed):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((20_000, 8)), columns=[f"c{i}" for i in range(8)])
    y = (X["c0"] + X["c1"] > 1).astype(int)
    serial = cross_val_score(LogisticRegression(), X, y, cv=4, n_jobs=1)
    parallel = cross_val_score(LogisticRegression(), X, y, cv=4, n_jobs=2)
    assert sklearn is not None
    np.testing.assert_array_equal(serial, parallel)
