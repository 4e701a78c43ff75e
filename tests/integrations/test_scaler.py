"""freight.integrations.scaler: FreightSerializer, locally and on a real local Scaler cluster."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import textwrap

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from scaler import Client, SchedulerClusterCombo
from scaler.client.serializer.mixins import Serializer

import freight
from freight.integrations.scaler import FreightSerializer

# Task functions are pickled by reference, so the workers (started with spawn) must import
# them: their folder is on sys.path here (pyproject's pytest pythonpath) and, via PYTHONPATH, in
# the cluster's processes.
_HERE = os.path.dirname(os.path.abspath(__file__))

import scaler_tasks  # noqa: E402

RESULT_TIMEOUT = 120  # seconds; generous, a loaded CI machine is slow to start workers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def cluster_address():
    address = f"tcp://127.0.0.1:{_free_port()}"
    old_pythonpath = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HERE, old_pythonpath) if p)
    cluster = None
    try:
        cluster = SchedulerClusterCombo(n_workers=2, address=address, logging_level="WARNING")
        yield address
    finally:
        try:
            if cluster is not None:
                cluster.shutdown()
        finally:
            if old_pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_pythonpath


@pytest.fixture(scope="module")
def client(cluster_address):
    scaler_client = Client(address=cluster_address, serializer=FreightSerializer())
    try:
        yield scaler_client
    finally:
        scaler_client.disconnect()


# --- without a cluster --------------------------------------------------------------------------


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": np.arange(6, dtype=np.int64),
            "y": np.linspace(0.0, 1.0, 6),
            "name": ["a", "b", "c", "d", "e", "f"],
            "when": pd.date_range("2024-01-01", periods=6, freq="D"),
            "flag": [True, False, True, False, True, False],
        }
    )


def test_is_a_scaler_serializer():
    assert issubclass(FreightSerializer, Serializer)
    serializer = FreightSerializer()
    assert isinstance(serializer, Serializer)
    assert isinstance(serializer.serialize(1), bytes)


def test_local_round_trip_int():
    serializer = FreightSerializer()
    for value in (0, 1, -7, 2**80):
        out = serializer.deserialize(serializer.serialize(value))
        assert out == value and type(out) is int


def test_local_round_trip_dataframe():
    serializer = FreightSerializer()
    df = _frame()
    pd.testing.assert_frame_equal(serializer.deserialize(serializer.serialize(df)), df)


def test_local_round_trip_lambda_and_closure():
    serializer = FreightSerializer()
    offset = 10
    fn = serializer.deserialize(serializer.serialize(lambda x: x + offset))
    assert fn(5) == 15

    def scale(x):
        return x * offset

    assert serializer.deserialize(serializer.serialize(scale))(3) == 30


def test_payload_is_a_freight_payload():
    payload = FreightSerializer().serialize({"a": [1, 2.5, "three"]})
    assert freight.loads(payload) == {"a": [1, 2.5, "three"]}


def test_pickles_with_cloudpickle_and_pickle():
    serializer = FreightSerializer()
    serializer.serialize(1)  # build the lazy codec: it must not be pickled
    for dumps, loads in ((cloudpickle.dumps, cloudpickle.loads), (pickle.dumps, pickle.loads)):
        copy = loads(dumps(serializer))
        assert type(copy) is FreightSerializer
        assert copy == serializer
        assert copy.deserialize(copy.serialize([1, "x", 2.5])) == [1, "x", 2.5]
        assert copy.deserialize(serializer.serialize(_frame())).equals(_frame())


def test_options_pass_through_and_survive_pickling():
    serializer = FreightSerializer(key=b"cluster-key", checksum=True, compression="lz4")
    assert serializer.options == {"key": b"cluster-key", "checksum": True, "compression": "lz4"}
    serializer.serialize(1)

    copy = cloudpickle.loads(cloudpickle.dumps(serializer))
    assert copy.options == serializer.options
    assert copy.deserialize(copy.serialize({"k": [1, 2, 3]})) == {"k": [1, 2, 3]}
    assert "FreightSerializer(" in repr(copy) and "compression='lz4'" in repr(copy) and "<set>" in repr(copy)

    # The key reaches the codec: a payload not signed with it is refused.
    with pytest.raises(freight.IntegrityError):
        copy.deserialize(FreightSerializer().serialize(lambda x: x + 1))
    assert copy.deserialize(serializer.serialize(lambda x: x + 1))(1) == 2


def test_unknown_option_is_rejected_early():
    """Issue 30: named as the user spelled the call (not ``Freight.replace()``), with the option meant."""
    with pytest.raises(freight.OptionError) as info:
        FreightSerializer(compresion="lz4")
    assert str(info.value) == (
        "FreightSerializer() got an unexpected keyword argument 'compresion'; did you mean 'compression'?"
    )
    with pytest.raises(TypeError):
        FreightSerializer(allow_pikle=False)


@pytest.mark.parametrize(
    "options",
    [{"allow_pickle": False}, {"allow_pickle": 0}, {"allowed_tags": ["numpy.ndarray"]}, {"allowed_tags": ()}],
)
def test_options_that_would_refuse_every_task_are_refused_when_built(options):
    """Issue 30: ``FreightSerializer(allow_pickle=False)`` was accepted, then every task failed on
    the workers: the task function travels through the serializer, as pickle."""
    with pytest.raises(freight.OptionError) as info:
        FreightSerializer(**options)
    message = str(info.value)
    assert message.startswith("FreightSerializer() cannot take allow")
    assert "function travels as pickle" in message and "key=" in message


def test_allowed_tags_with_pickle_are_accepted():
    serializer = FreightSerializer(allowed_tags=iter(["pickle", "numpy.ndarray"]))
    assert serializer.deserialize(serializer.serialize(scaler_tasks.add))(1, 2) == 3


def test_imports_without_scaler():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["scaler"] = None  # makes any `import scaler...` raise ImportError
        from freight.integrations.scaler import FreightSerializer
        assert FreightSerializer.__mro__ == (FreightSerializer, object), FreightSerializer.__mro__
        s = FreightSerializer()
        assert s.deserialize(s.serialize({"a": 1})) == {"a": 1}
        import pickle
        assert pickle.loads(pickle.dumps(s)).deserialize(s.serialize(3)) == 3
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# --- on a local Scaler cluster ------------------------------------------------------------------


def test_submit_add(client):
    assert client.submit(scaler_tasks.add, 1, 2).result(timeout=RESULT_TIMEOUT) == 3


def test_map(client):
    assert client.map(scaler_tasks.add, range(20), range(20)) == [2 * i for i in range(20)]


def test_large_numpy_array(client):
    arr = np.random.default_rng(0).standard_normal(8 * 1024 * 1024)  # float64: 64 MiB
    assert arr.nbytes == 64 * 1024 * 1024
    out = client.submit(scaler_tasks.double, arr).result(timeout=RESULT_TIMEOUT)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float64
    assert out.shape == arr.shape
    assert np.array_equal(out, arr * 2)


def test_closure_capturing_local_variable(client):
    offset = 41
    factor = np.float64(1.5)

    def shift(x):
        return x * factor + offset

    assert client.submit(shift, 2).result(timeout=RESULT_TIMEOUT) == 44.0
    assert client.submit(lambda a, b: (a + offset) * b, 1, 3).result(timeout=RESULT_TIMEOUT) == 126
    # A closure as an argument, and one created on the worker and returned to the client.
    assert client.submit(scaler_tasks.apply, shift, 4).result(timeout=RESULT_TIMEOUT) == 47.0
    triple = client.submit(scaler_tasks.make_multiplier, 3).result(timeout=RESULT_TIMEOUT)
    assert triple(14) == 42


def test_dataframe_in_and_out(client):
    df = _frame()
    pd.testing.assert_frame_equal(client.submit(scaler_tasks.identity, df).result(timeout=RESULT_TIMEOUT), df)
    out = client.submit(scaler_tasks.enrich_frame, df).result(timeout=RESULT_TIMEOUT)
    pd.testing.assert_frame_equal(out, scaler_tasks.enrich_frame(df))


def test_data_library_values_through_workers(client):
    """Workers (fresh spawned processes) load freight's serializers for each library on first
    use, decode the arguments and encode the results, with no pickle involved."""
    import polars as pl
    import pyarrow as pa
    import scipy.sparse as sp
    import torch

    values = {
        "polars": pl.DataFrame({"a": [1, 2, 3], "s": ["x", None, "z"]}),
        "arrow": pa.table({"v": pa.array([1.5, None, 3.0])}),
        "torch": torch.arange(12, dtype=torch.bfloat16).reshape(3, 4),
        "sparse": sp.random(20, 20, density=0.1, format="csr", random_state=1),
        "frame": _frame(),
    }
    assert not freight.inspect(freight.dumps(values))["needs_pickle"]
    kinds = client.submit(scaler_tasks.describe_each, values).result(timeout=RESULT_TIMEOUT)
    assert kinds == {name: type(v).__module__.split(".")[0] for name, v in values.items()}
    back = client.submit(scaler_tasks.identity, values).result(timeout=RESULT_TIMEOUT)
    assert back["polars"].equals(values["polars"])
    assert back["arrow"].equals(values["arrow"])
    assert torch.equal(back["torch"], values["torch"]) and back["torch"].dtype == torch.bfloat16
    assert (back["sparse"] != values["sparse"]).nnz == 0
    pd.testing.assert_frame_equal(back["frame"], values["frame"])


def test_workers_use_the_shipped_serializer_and_options(cluster_address):
    """The serializer instance (a subclass, with its options) reaches the workers and decodes there."""
    options = (("checksum", False),)
    with Client(address=cluster_address, serializer=scaler_tasks.RecordingSerializer(checksum=False)) as other:
        calls = other.submit(scaler_tasks.recorded_calls).result(timeout=RESULT_TIMEOUT)
        assert ("deserialize", "function", options) in calls
        assert other.submit(scaler_tasks.add, 20, 22).result(timeout=RESULT_TIMEOUT) == 42
        # The client side went through the same serializer.
        assert ("serialize", "function", options) in scaler_tasks.CALLS
        assert ("deserialize", "int", options) in scaler_tasks.CALLS


CLUSTER_KEY = b"the cluster's signing key, 32 by"


def test_signed_compressed_strict_serializer_reaches_the_workers(cluster_address):
    """compression and key travel with the serializer: values round-trip signed and compressed,
    and a worker refuses an argument signed with another key. (allow_pickle=False cannot be a
    Scaler option: the task function itself goes through the serializer, by reference, which is
    pickle; the key is what authenticates a client's payloads.)"""
    options = {"compression": "lz4", "key": CLUSTER_KEY}
    arr = np.arange(200_000, dtype=np.int64) % 7  # compressible
    with Client(address=cluster_address, serializer=scaler_tasks.WrongKeySerializer(**options)) as signed:
        back = signed.submit(scaler_tasks.double, arr).result(timeout=RESULT_TIMEOUT)
        np.testing.assert_array_equal(back, arr * 2)
        info = freight.inspect(scaler_tasks.WrongKeySerializer(**options).serialize(arr))
        assert info["signed"] and any(f["codec"] == "lz4" for f in info["frames"])
        with pytest.raises(Exception) as refused:  # noqa: PT011 - Scaler wraps the worker's error
            signed.submit(scaler_tasks.identity, scaler_tasks.WRONG_KEY_MARKER).result(timeout=RESULT_TIMEOUT)
        assert "IntegrityError" in repr(refused.value) or "signature" in str(refused.value).lower()
