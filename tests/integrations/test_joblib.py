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
    fj.install()
    yield
    get_reusable_executor().shutdown(wait=True)


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


def test_numpy_arguments_keep_joblibs_memmapping(installed):
    a = np.ones(4 * BIG // 8)
    ((where, total),) = joblib.Parallel(n_jobs=2, backend="loky", max_nbytes="1M")(
        joblib.delayed(where_array)(x) for x in [a]
    )
    assert total == a.sum()
    assert shm.PREFIX not in where  # joblib memory-mapped it from its temporary folder
    # numpy results: joblib's own result reducer for ndarray comes after freight's registration
    # in the worker's pickler, so they take joblib's way (the pipe); they must still come back equal
    back = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(make)(n) for n in [BIG // 8, 10])
    assert (back[0] == 3.0).all() and (back[1] == 3.0).all()


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
