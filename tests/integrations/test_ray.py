"""freight.integrations.ray: freight registered per type on a real local Ray cluster (started once
for the module, workers registering through the runtime_env's setup hook); ray.put/ray.get and
remote tasks with polars, torch, pandas and pyarrow values, results checked; failure modes."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import torch

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray")

import freight  # noqa: E402
import freight.integrations.ray as fr  # noqa: E402

pytestmark = pytest.mark.timeout(300)

# Task functions are pickled by reference: the workers import this module from its folder.
_HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env=fr.runtime_env({"env_vars": {"PYTHONPATH": _HERE}}),
    )
    try:
        fr.install()
        yield
    finally:
        fr.uninstall()
        ray.shutdown()


# --- values --------------------------------------------------------------------------------------


def big_polars(seed=0, rows=200_000):
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "i": np.arange(rows),
            "f": rng.random(rows),
            "s": [f"name-{i % 997}" for i in range(rows)],
            "d": pl.Series(rng.integers(0, 10**6, rows)).cast(pl.Datetime("ms")),
            "c": pl.Series([["a", "b", "c"][i % 3] for i in range(rows)], dtype=pl.Categorical),
        }
    )


def pandas_frame(rows=10_000):
    return pd.DataFrame({"i": np.arange(rows), "s": [f"x{i}" for i in range(rows)], "f": np.linspace(0, 1, rows)})


def written_with_freight(value) -> bool:
    """Whether this process writes ``value`` through freight: Ray pickles with its cloudpickle, and
    the stream then holds a freight header (its magic bytes), in band."""
    return b"\x89FRT" in ray.cloudpickle.dumps(value, protocol=5, buffer_callback=lambda b: False)


# --- tasks (run in the workers) ------------------------------------------------------------------


@ray.remote
def worker_registrations():
    import freight.integrations.ray as fr

    return fr.installed()


@ray.remote
def polars_task(df):
    # Built in the worker, returned through the worker's registration.
    return df.with_columns((pl.col("f") * 2).alias("g")), written_with_freight(df)


@ray.remote
def torch_task(t):
    out = t * 2
    out.add_(1)  # the argument's copy is writable too: torch has no read-only tensors
    t.add_(0)
    return out


@ray.remote
def echo(x):
    return x


@ray.remote
def call(fn, x):
    return fn(x)


# --- tests ---------------------------------------------------------------------------------------


def test_registrations_in_driver_and_workers(cluster):
    assert fr.installed() == sorted(fr.DEFAULT_TYPES)
    # Every worker registered at start through the setup hook.
    for names in ray.get([worker_registrations.remote() for _ in range(4)]):
        assert names == sorted(fr.DEFAULT_TYPES)
    assert written_with_freight(big_polars(rows=100_000))
    assert written_with_freight(torch.arange(3))
    # Not registered: numpy (Ray's own zero-copy path), pandas and pyarrow (Ray's default measured
    # faster), small polars frames (their own pickling, faster below MIN_BYTES).
    assert not written_with_freight(np.arange(10))
    assert not written_with_freight(pandas_frame())
    assert not written_with_freight(pa.table({"a": [1, 2]}))
    assert not written_with_freight(pl.DataFrame({"a": [1, 2]}))


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(big_polars(), id="polars-frame"),
        pytest.param(pl.Series("s", np.arange(300_000, dtype=np.int32)), id="polars-series"),
        pytest.param(pl.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"]}), id="polars-small"),
        pytest.param(torch.randn(256, 512), id="torch-float32"),
        pytest.param(torch.arange(24, dtype=torch.bfloat16).reshape(2, 3, 4).transpose(0, 2), id="torch-bf16-strided"),
        pytest.param(torch.ones(5, requires_grad=True), id="torch-requires-grad"),
        pytest.param(pandas_frame(), id="pandas"),
        pytest.param(pa.Table.from_pandas(pandas_frame()), id="pyarrow"),
    ],
)
def test_put_get_and_task_roundtrip(cluster, value):
    for got in (ray.get(ray.put(value)), ray.get(echo.remote(value))):
        assert type(got) is type(value)
        if isinstance(value, torch.Tensor):
            assert torch.equal(got, value) and got.dtype == value.dtype and got.requires_grad == value.requires_grad
        elif isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(got, value)
        else:
            assert got.equals(value)


def test_polars_tasks_compute_and_return_through_freight(cluster):
    frames = [big_polars(seed) for seed in range(4)]
    results = ray.get([polars_task.remote(df) for df in frames])
    for df, (out, worker_writes_with_freight) in zip(frames, results):
        assert worker_writes_with_freight
        assert out.columns == [*df.columns, "g"]
        assert out.drop("g").equals(df)
        np.testing.assert_allclose(out["g"].to_numpy(), df["f"].to_numpy() * 2)


def test_torch_tasks_get_writable_tensors(cluster):
    t = torch.randint(0, 1000, (1024, 1024)).float()  # small integers: exact arithmetic
    out = ray.get(torch_task.remote(t))
    assert torch.equal(out, t * 2 + 1)
    out.add_(1)  # the result is writable here too
    assert torch.equal(out, t * 2 + 2)


def test_closure_carrying_a_tensor_and_a_polars_frame(cluster):
    weights = torch.arange(1_000_000, dtype=torch.float64)
    lookup = big_polars(rows=100_000)

    def score(i):
        return float(weights[i]) + float(lookup["f"][i])

    # The closure is cloudpickled; the tensor and the frame inside it go through freight.
    assert written_with_freight(score)
    assert ray.get(call.remote(score, 12345)) == pytest.approx(12345 + lookup["f"][12345])


def test_serializer_frames_go_out_of_band():
    parts = fr.serialize(torch.zeros(1 << 20, dtype=torch.uint8))
    assert isinstance(parts[0], bytes)
    assert any(isinstance(p, pickle.PickleBuffer) for p in parts[1:])
    buffers = []
    data = pickle.dumps(parts, protocol=5, buffer_callback=buffers.append)
    assert len(data) < 4096 and sum(b.raw().nbytes for b in buffers) >= 1 << 20
    got = fr.deserialize(pickle.loads(data, buffers=buffers))
    assert torch.equal(got, torch.zeros(1 << 20, dtype=torch.uint8))


# --- failure modes -------------------------------------------------------------------------------


class Corrupt:
    """Reduces to freight's deserializer over bytes that are not a payload (as a damaged object
    would)."""

    def __reduce__(self):
        return (fr.deserialize, ((b"not a freight payload",),))


def test_a_damaged_payload_fails_with_freights_message(cluster):
    with pytest.raises(ray.exceptions.RaySystemError, match="not a freight payload") as info:
        ray.get(ray.put(Corrupt()))
    assert "freight.exceptions.DeserializationError" in str(info.value)


def test_a_worker_without_freight_fails(cluster, tmp_path):
    # A folder first on the workers' path with a freight package that cannot be imported stands in
    # for a worker where freight is not installed: its setup hook fails and Ray reports the
    # worker crashed (the hook's ImportError is in the raylet log).
    fake = tmp_path / "freight"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('freight is not installed on this worker')\n")
    task = echo.options(max_retries=0, runtime_env={"env_vars": {"PYTHONPATH": str(tmp_path)}})
    with pytest.raises(ray.exceptions.WorkerCrashedError):
        ray.get(task.remote(big_polars(rows=100_000)), timeout=240)


def test_install_before_ray_init_and_bad_arguments(cluster):
    code = "import freight.integrations.ray as fr; fr.install()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0
    assert "RayNotStartedError" in proc.stderr and "ray.init" in proc.stderr
    assert issubclass(fr.RayNotStartedError, freight.FreightError)
    with pytest.raises(TypeError, match="numpy"):
        fr.install(["numpy.ndarray"])
    with pytest.raises(TypeError, match="names no class"):
        fr.runtime_env(types=["polars.NoSuchClass"])
    with pytest.raises(ValueError, match="setup_worker"):
        fr.runtime_env({"worker_process_setup_hook": "mypackage.setup"})
    with pytest.raises(freight.FreightError):
        fr.runtime_env(compression="no-such-codec")
    env = fr.runtime_env({"env_vars": {"A": "1"}}, types=[pl.DataFrame, "torch.Tensor"], compression="lz4")
    assert env["worker_process_setup_hook"] == "freight.integrations.ray.setup_worker"
    assert env["env_vars"] == {
        "A": "1",
        "FREIGHT_RAY_TYPES": "polars.dataframe.frame.DataFrame,torch.Tensor",
        "FREIGHT_RAY_COMPRESSION": "lz4",
    }


def test_a_compression_with_a_setting_reaches_the_workers_as_the_driver_gave_it():
    # The setup hook reads the compression back from an environment variable: a (name, setting)
    # pair must survive that (str() of the tuple did not parse).
    from freight.integrations.ray import _compression_from_env

    for compression in ("lz4", "zstd", ("zstd", 9), ("zstd", -3), ("auto", 1e8), "auto"):
        text = fr.runtime_env(compression=compression)["env_vars"]["FREIGHT_RAY_COMPRESSION"]
        back = _compression_from_env(text)
        assert back == compression
        freight.Freight(compression=back)  # the worker's install() accepts it
