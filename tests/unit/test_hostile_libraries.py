"""Hostile metadata for freight's library serializers (all declared ``safe = True``): a payload
built from them must load with ``allow_pickle=False`` into a sound object or raise
DeserializationError at load time; it must never crash the interpreter (now or at the first
use of what was loaded), alias memory it may not write, or hand back an object that breaks
later. Payloads are written by the real encoder: a serializer registered on a separate
``freight.Freight()`` writes arbitrary metadata under a built-in tag, and plain
``freight.loads`` reads it back with the built-in serializer. Cases that crashed before their fix run
in a subprocess."""

from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import freight

# Shared by this module and the subprocesses: writes payloads with arbitrary metadata (and
# frames) under any tag, nested nodes included.
FORGE = r'''
import sys
import numpy as np
import freight

_FORGER = freight.Freight()
_BOXES = {}


def node(tag, meta, frames=()):
    """A value that the forger writes as a node of ``tag`` with this metadata and frames."""
    cls = _BOXES.get(tag)
    if cls is None:
        cls = _BOXES[tag] = type("Box", (), {})

        class Writer:
            safe = True

            def serialize(self, box):
                return box.meta, box.frames

            def deserialize(self, meta, frames):
                raise AssertionError("only for writing")

        _FORGER.register(Writer(), tag=tag, types=(cls,))
    box = cls()
    box.meta, box.frames = meta, list(frames)
    return box


def forge(tag, meta, frames=()):
    return _FORGER.dumps(node(tag, meta, frames))


def load_or_refuse(blob, **options):
    """(True, None) when loading raises DeserializationError, else (False, value)."""
    try:
        return False, freight.loads(blob, allow_pickle=False, **options)
    except freight.DeserializationError:
        return True, None
'''
exec(FORGE, globals())  # noqa: S102 - defines node, forge, load_or_refuse here too


def run_isolated(*parts: str, stdin: bytes | None = None, expect: str = "REFUSED") -> None:
    """Runs ``parts`` (after FORGE, each dedented) in a fresh interpreter; it prints REFUSED when loading was
    refused, and otherwise goes on to use the loaded value as a program would (which crashes
    before the fix). Passes only when the last line printed is ``expect`` and the interpreter exited
    cleanly."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", RUST_BACKTRACE="0")
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", FORGE + "".join(textwrap.dedent(part) for part in parts)],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=env,
    )
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    crashed = " (killed by a signal: a crash)" if proc.returncode < 0 else ""
    assert proc.returncode == 0 and out.strip().endswith(expect), (
        f"exit status {proc.returncode}{crashed}; stdout: {out[-800:]!r}; stderr: {err[-1500:]!r}"
    )


def bytes_retained_after_loading(blobs: list[bytes]) -> int:
    """Bytes still allocated once every blob was loaded (refusals ignored) and garbage collected:
    what caches or leaks keep of the payloads."""
    gc.collect()
    tracemalloc.start()
    try:
        for blob in blobs:
            try:
                freight.loads(blob, allow_pickle=False)
            except freight.DeserializationError:
                pass
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


# -- pandas ------------------------------------------------------------------------------------


def test_pandas_tz_column_of_a_0d_array_is_refused_not_a_segfault_on_repr():
    run_isolated(
        """
        import pandas as pd
        meta = {
            "values": {"tz": "datetime64[us, UTC]", "utc": np.array(np.datetime64("2026-01-01", "us"))},
            "index": {"range": (0, 3, 1), "name": None},
            "name": None, "attrs": {}, "allows_duplicate_labels": True,
        }
        refused, s = load_or_refuse(forge("pandas.Series", meta))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        repr(s)  # segfaults in DatetimeArray.__iter__
        """
    )


@pytest.mark.parametrize("tag", ["pandas.Series", "pandas.Index"])
def test_pandas_tz_values_must_be_one_dimensional(tag):
    import pandas as pd

    utc = pd.date_range("2026", periods=3).to_numpy().astype("M8[us]").reshape(3, 1)
    values = {"tz": "datetime64[us, UTC]", "utc": utc}
    if tag == "pandas.Series":
        meta = {
            "values": values,
            "index": {"range": (0, 3, 1), "name": None},
            "name": None,
            "attrs": {},
            "allows_duplicate_labels": True,
        }
    else:
        meta = {"values": values, "name": None}
    # Before the fix: a Series (or Index) of 1-tuples of Timestamps, object dtype.
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge(tag, meta), allow_pickle=False)


def _sparse_series_meta(**values):
    meta = {
        "values": {
            "sparse": np.array([10, 20]),
            "indices": np.array([1, 3], np.int32),
            "length": 5,
            "fill": 0,
            "kind": "integer",
            "subtype": "int64",
        },
        "index": {"range": (0, 5, 1), "name": None},
        "name": None,
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    meta["values"].update(values)
    return meta


@pytest.mark.parametrize(
    "values",
    [
        dict(kind="block", indices=np.array([3, 1], np.int32)),  # before the fix: [0, 0, 0, 10, 20]
        dict(kind="block", indices=np.array([1, 1], np.int32)),  # before the fix: [0, 10, 20, 0, 0]
        dict(kind="block", indices=np.array([-3, 1], np.int32)),  # before the fix: loads, then ValueError on repr
        dict(indices=np.array([2**32 + 1, 2**32 + 3], np.int64)),  # before the fix: wraps to [1, 3] silently
    ],
    ids=["block not increasing", "block duplicate", "block negative", "int64 positions wrapping in int32"],
)
def test_pandas_sparse_positions_are_checked_for_every_index_kind(values):
    import pandas  # noqa: F401

    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Series", _sparse_series_meta(**values)), allow_pickle=False)


def test_pandas_series_values_must_be_an_array_not_a_scalar_to_broadcast():
    # {"np": 5} with RangeIndex(0, 10**9) is a 148-byte payload that allocates 8 GB on load
    # (measured: 2.6 s, 7.9 GB max RSS); here with a small index.
    import pandas  # noqa: F401

    meta = {
        "values": {"np": 5},
        "index": {"range": (0, 3, 1), "name": None},
        "name": None,
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Series", meta), allow_pickle=False)


def test_pandas_multiindex_codes_beyond_their_level_are_refused_not_truncated():
    import pandas  # noqa: F401

    meta = {
        "levels": [{"range": (0, 2, 1), "name": None}, {"range": (0, 2, 1), "name": None}],
        # before the fix: 2**40 is cast to int8 (0) before pandas checks it, so the 4th entry reads (0, 1)
        "codes": [np.array([0, 0, 1, 2**40], np.int64), np.array([0, 1, 0, 1], np.int8)],
        "names": [None, None],
    }
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Index", meta), allow_pickle=False)


# -- pyarrow -----------------------------------------------------------------------------------

# These forge payloads of the Python form (freight.serializers.arrow_python), which payloads of
# earlier versions hold and every version must still load safely; test_arrow_rust.py forges the
# Rust form.
ARROW = """
import pyarrow as pa, pyarrow.compute as pc
from freight.serializers import arrow_python as farp
"""


def test_arrow_negative_array_offset_is_refused_not_a_segfault():
    run_isolated(
        ARROW,
        """
        meta, frames = farp.encode_array(pa.array([1, 2, None, 4]))
        meta["offset"] = -100
        refused, arr = load_or_refuse(forge("pyarrow.Array", meta, frames))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        arr.validate(full=True)  # segfaults (so does to_pylist)
        """,
    )


def test_arrow_negative_child_offset_is_refused_not_read_out_of_bounds():
    import pyarrow as pa

    from freight.serializers import arrow_python as farp

    meta, frames = farp.encode_array(pa.array([{"x": 1}, {"x": 2}, {"x": 3}]))
    meta["children"][0]["offset"] = -1000
    # Before the fix it loads, passes validate(full=True), and to_pylist() returns values read from the
    # 8000 bytes before the child's buffer.
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pyarrow.Array", meta, frames), allow_pickle=False)


def test_arrow_null_count_is_not_taken_from_the_payload():
    import pyarrow as pa

    from freight.serializers import arrow_python as farp

    meta, frames = farp.encode_array(pa.array([1, 2, None, 4]))
    frames[meta["buffers"][1]] = pa.py_buffer(np.array([1, 2, 666, 4], np.int64).tobytes())
    meta["null_count"] = 0  # the validity bitmap still says slot 2 is null
    try:
        arr = freight.loads(forge("pyarrow.Array", meta, frames), allow_pickle=False)
    except freight.DeserializationError:
        return
    # Before the fix: [1, 2, 666, 4] (validate(full=True) passes), and pc.is_null says no nulls.
    assert arr.to_pylist() == [1, 2, None, 4]


def test_arrow_string_offsets_that_decrease_are_refused_not_a_segfault():
    run_isolated(
        ARROW,
        """
        meta, frames = farp.encode_array(pa.array(["ab", "cd", "ef"]))
        frames[meta["buffers"][1]] = pa.py_buffer(np.array([0, 4, 2, 6], np.int32).tobytes())
        refused, arr = load_or_refuse(forge("pyarrow.Array", meta, frames))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        pc.unique(arr)  # segfaults
        """,
    )


@pytest.mark.parametrize("layout", ["sparse union, type id 77", "string view into a missing buffer"])
def test_arrow_ipc_arrays_are_validated_not_a_segfault(layout):
    build = {
        "sparse union, type id 77": """
            t = pa.sparse_union([pa.field("i", pa.int64()), pa.field("s", pa.string())])
            bad = pa.UnionArray.from_buffers(
                t, 3, [None, pa.py_buffer(bytes([0, 77, 0]))], children=[pa.array([1, 2, 3]), pa.array(["a", "b", "c"])]
            )
            """,
        "string view into a missing buffer": """
            import struct
            view = struct.pack("<i", 100000) + bytes(4) + struct.pack("<ii", 3, 0)
            bad = pa.Array.from_buffers(pa.string_view(), 1, [None, pa.py_buffer(view), pa.py_buffer(b"x" * 16)])
            """,
    }[layout]
    run_isolated(
        ARROW,
        build,
        """
        sink = pa.BufferOutputStream()
        batch = pa.RecordBatch.from_arrays([bad], names=[""])
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        refused, arr = load_or_refuse(forge("pyarrow.Array", {"ipc": 0}, [sink.getvalue()]))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        arr.to_pylist()  # segfaults
        """,
    )


def test_arrow_type_cache_does_not_keep_a_type_from_before_its_extension_was_registered():
    import pandas as pd
    import pandas.core.arrays.arrow.extension_types  # noqa: F401 - registers pandas.period
    import pyarrow as pa

    blob = freight.dumps(pa.array(pd.array(pd.period_range("2020", periods=3, freq="D"))))
    run_isolated(
        """
        import pyarrow as pa
        blob = sys.stdin.buffer.read()
        first = freight.loads(blob, allow_pickle=False)  # pandas not imported: its storage, int64
        import pandas.core.arrays.arrow.extension_types  # now pandas.period is registered
        again = freight.loads(blob, allow_pickle=False)
        print("again:", again.type)
        # Before the fix the cached int64 type is reused: "again" is int64 where a fresh process (or
        # far._type_from.cache_clear()) gives extension<pandas.period<ArrowPeriodType>>.
        print("OK" if isinstance(again.type, pa.BaseExtensionType) else "STALE")
        """,
        stdin=blob,
        expect="OK",
    )


def test_arrow_type_cache_does_not_retain_payload_bytes():
    import pyarrow as pa

    from freight.serializers import arrow_python as farp

    meta, frames = farp.encode_array(pa.array([1, 2, 3]))
    blobs = []
    for _ in range(4):  # type wires carrying 4 MiB of field metadata each
        wire = pa.schema([pa.field("", pa.int64(), metadata={b"pad": os.urandom(1 << 22)})]).serialize().to_pybytes()
        blobs.append(forge("pyarrow.Array", dict(meta, type=wire), frames))
    retained = bytes_retained_after_loading(blobs)
    # Before the fix ~16.8 MB stay referenced by the lru_cache of _type_from (up to 512 such keys).
    assert retained < 4 << 20, f"{retained / 1e6:.1f} MB of payload bytes retained after the loads"


# -- polars ------------------------------------------------------------------------------------


def test_polars_frame_over_an_invalid_arrow_table_is_refused_not_a_segfault_in_loads():
    run_isolated(
        ARROW,
        """
        col, frames = farp.encode_array(pa.array(["ab", "cd", "ef"]))
        frames[col["buffers"][1]] = pa.py_buffer(np.array([0, 4, 2, 6], np.int32).tobytes())
        schema = pa.schema([("s", pa.string())]).serialize().to_pybytes()
        table = node("pyarrow.Table", {"schema": schema, "columns": [[col]]}, frames)
        blob = forge("polars.DataFrame", {"table": table})
        print("LOADING", flush=True)
        refused, df = load_or_refuse(blob)  # segfaults inside pl.from_arrow
        print("REFUSED" if refused else "LOADED")
        """,
    )


@pytest.mark.parametrize(
    "metadata",
    [{b"_PL_ENUM_VALUES2": b"99;a1;b"}, {b"_PL_ENUM_VALUES2": b"1;a1;a"}, {b"_PL_CATEGORICAL2": b"garbage"}],
    ids=["enum length beyond text", "enum duplicate", "categorical garbage"],
)
def test_polars_malformed_field_metadata_is_a_deserialization_error_not_a_panic(metadata):
    import polars  # noqa: F401
    import pyarrow as pa

    arr = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.uint8()), pa.array(["a", "b"], pa.large_string()))
    table = pa.table({"e": arr}, schema=pa.schema([pa.field("e", arr.type, metadata=metadata)]))
    blob = forge("polars.DataFrame", {"table": table})
    try:
        freight.loads(blob, allow_pickle=False)
    except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        assert isinstance(exc, freight.DeserializationError), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    else:
        pytest.fail("a polars frame with malformed enum/categorical metadata loaded")


# -- scipy.sparse ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, use",
    [
        ('meta["indices"] = np.array([0, 2, 1000000], np.int32)', "m.toarray()"),
        ('meta["indices"] = np.array([0, 2, -1000000], np.int32)', "m.toarray()"),
        ('meta.update(kind="csc_matrix", shape=(3, 2), indices=np.array([0, 2, 1000000], np.int32))', "m @ np.ones(2)"),
    ],
    ids=["csr column beyond the shape", "csr negative column", "csc row beyond the shape"],
)
def test_scipy_compressed_indices_are_checked_not_a_segfault(change, use):
    run_isolated(
        f"""
        import scipy.sparse as sp
        from freight.serializers import scipy_sparse as fsp
        meta, _ = fsp.SparseSerializer().serialize(sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0]])))
        {change}
        refused, m = load_or_refuse(forge("scipy.sparse", meta))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        {use}  # segfaults
        """
    )


# -- torch -------------------------------------------------------------------------------------


def _read_only_tensor_payload() -> bytes:
    data = np.zeros(1 << 19, np.float32)  # 2 MiB
    data.flags.writeable = False  # one flag in the payload
    return forge("torch.Tensor", {"data": data, "dtype": "torch.float32", "device": "cpu", "requires_grad": False})


def test_torch_tensor_over_a_read_only_frame_does_not_write_into_the_callers_bytes():
    import torch

    blob = _read_only_tensor_payload()
    before = hashlib.sha256(blob).digest()
    t = freight.loads(blob, allow_pickle=False)  # zero_copy not asked for
    t.add_(1)  # an ordinary in-place update
    assert isinstance(t, torch.Tensor)
    assert hashlib.sha256(blob).digest() == before, (
        "an in-place op on the loaded tensor changed the immutable input bytes"
    )


def test_torch_tensor_loaded_from_a_mapped_file_can_be_updated_in_place_without_a_segfault(tmp_path):
    path = tmp_path / "tensor.frt"
    path.write_bytes(_read_only_tensor_payload())  # >= 1 MiB: freight.load maps it read-only
    run_isolated(
        f"""
        import torch
        t = freight.load({str(path)!r}, allow_pickle=False)
        t.add_(1)  # segfaults: the tensor views the read-only mapping
        print("OK" if float(t[0]) == 1.0 else "WRONG")
        """,
        expect="OK",
    )


# -- tensorflow --------------------------------------------------------------------------------


def test_tensorflow_ragged_payload_without_levels_is_refused_not_a_dense_tensor():
    import tensorflow as tf

    meta = {"values": {"dtype": "int32", "device": "", "data": np.arange(6, dtype=np.int32)}, "levels": []}
    try:
        out = freight.loads(forge("tensorflow.RaggedTensor", meta), allow_pickle=False)
    except freight.DeserializationError:
        return
    assert isinstance(out, tf.RaggedTensor), f"a tensorflow.RaggedTensor payload loaded as {type(out).__name__}"


def test_tensorflow_bool_tensor_from_non_canonical_bytes_is_refused_or_normalised():
    import tensorflow as tf

    raw = np.array([0, 2, 255], np.uint8)
    meta = {"dtype": "bool", "device": "", "data": raw, "bits": True}  # also without bits: raw.view(bool)
    try:
        t = freight.loads(forge("tensorflow.Tensor", meta), allow_pickle=False)
    except freight.DeserializationError:
        return
    # Before the fix it prints [False, True, True] yet t == True is all False and logical_not is all True.
    assert tf.logical_not(t).numpy().tolist() == [True, False, False]
    assert (t == True).numpy().tolist() == [False, True, True]  # noqa: E712


def test_torch_data_must_match_the_declared_dtype():
    meta = {"data": np.arange(4, dtype=np.int64), "dtype": "torch.float32", "device": "cpu", "requires_grad": False}
    with pytest.raises(freight.DeserializationError, match="float32"):
        freight.loads(forge("torch.Tensor", meta), allow_pickle=False)
    bits = dict(meta, data=np.zeros(4, dtype=np.uint8), dtype="torch.bfloat16")  # bits of the wrong size
    with pytest.raises(freight.DeserializationError, match="bfloat16"):
        freight.loads(forge("torch.Tensor", bits), allow_pickle=False)


def test_pandas_time_zones_that_name_files_are_refused(tmp_path):
    import pandas as pd

    s = pd.Series(pd.date_range("2026", periods=2, tz="UTC"))
    meta, _ = freight.serializers.pandas.SeriesSerializer().serialize(s)
    meta["values"]["tz"] = f"datetime64[us, dateutil/{tmp_path}/zone]"
    with pytest.raises(freight.DeserializationError, match="file paths"):
        freight.loads(forge("pandas.Series", meta), allow_pickle=False)


# -- scipy.sparse: the fuzzing campaign's heap corruption ----------------------------------------


@pytest.mark.parametrize(
    "indptr",
    [
        # The crasher the mutation campaign found: scipy's check_format(full_check=True) prunes to
        # nnz = indptr[-1] = 0 first and then skips the order check, and its kernels wrote out of
        # bounds (glibc: "corrupted size vs. prev_size", at exit or in the garbage collector).
        [
            0,
            768,
            2048,
            3840,
            4096,
            5376,
            7168,
            8448,
            10240,
            11008,
            11776,
            12544,
            13568,
            15104,
            15104,
            16384,
            16896,
            17152,
            18176,
            19968,
            0,
        ],
        [0, 4, 2, 6, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 80],  # decreasing
        [0] * 20 + [90],  # past the indices
    ],
    ids=["pruned-to-zero", "decreasing", "past-the-end"],
)
def test_scipy_forged_indptr_is_refused_before_scipy_sees_it(indptr):
    run_isolated(
        f"""
        import scipy.sparse as sp
        m = sp.random(20, 20, density=0.2, format="csr", random_state=1)
        meta = {{"kind": "csr_matrix", "shape": (20, 20), "data": m.data, "indices": m.indices,
                 "indptr": np.array({indptr!r}, dtype=np.int32), "sorted": True}}
        refused, value = load_or_refuse(forge("scipy.sparse", meta))
        if refused:
            print("REFUSED")
        else:
            repr(value); value.sum(); value.toarray(); value.sum_duplicates()
            import gc; gc.collect()
            print("LOADED")
        """
    )


@pytest.mark.parametrize(
    "kind,meta",
    [
        ("csr", {"indices": "np.array([0, 25], dtype=np.int32)", "indptr": "np.array([0, 1, 2], dtype=np.int32)"}),
        ("csr", {"indices": "np.array([0, 1], dtype=np.uint8)", "indptr": "np.array([0, 1, 2], dtype=np.int32)"}),
        ("csr", {"indices": "np.array([0, 1], dtype='>i4')", "indptr": "np.array([0, 1, 2], dtype='>i4')"}),
        ("csr", {"data": "np.array([b'ab', b'cd'])"}),
        ("coo", {"coords": "(np.array([0, 40]), np.array([0, 1]))"}),
        ("coo", {"coords": "(np.array([0, 1]), np.array([0]))"}),
        ("dia", {"data": "np.ones((3, 20))", "offsets": "np.array([0, 1], dtype=np.int32)"}),
        ("dia", {"data": "np.ones((2, 20))", "offsets": "np.array([0, 2147483641], dtype=np.int32)"}),
        (
            "bsr",
            {
                "data": "np.ones((2, 3, 3))",
                "indices": "np.array([0, 1], dtype=np.int32)",
                "indptr": "np.array([0, 1, 2], dtype=np.int32)",
            },
        ),
    ],
    ids=[
        "index-out-of-range",
        "uint8-indices",
        "big-endian",
        "bytes-data",
        "coo-out-of-range",
        "coo-lengths",
        "dia-offsets",
        "dia-offset-overflow",
        "bsr-blocks-do-not-tile",
    ],
)
def test_scipy_forged_structures_are_refused(kind, meta):
    fields = {
        "data": "np.ones(2)",
        "indices": "np.array([0, 1], dtype=np.int32)",
        "indptr": "np.array([0, 1, 2], dtype=np.int32)",
        "coords": "(np.array([0, 1]), np.array([0, 1]))",
        "offsets": "np.array([0], dtype=np.int32)",
    }
    fields.update(meta)
    keys = {
        "csr": ("data", "indices", "indptr"),
        "bsr": ("data", "indices", "indptr"),
        "coo": ("data", "coords"),
        "dia": ("data", "offsets"),
    }[kind]
    body = ", ".join(f"{k!r}: {fields[k]}" for k in keys)
    run_isolated(
        f"""
        meta = {{"kind": "{kind}_matrix", "shape": (20, 20), {body}}}
        refused, value = load_or_refuse(forge("scipy.sparse", meta))
        print("REFUSED" if refused else "LOADED")
        """
    )


# -- payload-controlled indices handed to C libraries: Arrow, torch, pandas, TensorFlow ----------
# Each case was crafted by reading the serializer's load path (not only by random mutation) and
# run under glibc's heap checks and AddressSanitizer (see fuzz/loads_mutations.py --asan).

# Runs in the child: loads every (name, tag, meta, frames) in CASES and prints the names that
# loaded, then REFUSED when none did. A case that crashes the child fails the test.
ALL_REFUSED = """
loaded = []
for name, tag, meta, frames in CASES:
    refused, value = load_or_refuse(forge(tag, meta, frames))
    if not refused:
        repr(value)
        loaded.append(name)
import gc; gc.collect()
print("LOADED", loaded) if loaded else print("REFUSED")
"""

ARROW_FORGE = """
import pyarrow as pa
from freight.serializers.arrow import _type_wire

frames = []


def frame(data):
    frames.append(np.asarray(data).tobytes())
    return len(frames) - 1


def arr(t, length, buffers, children=()):
    return {"type": _type_wire(t), "length": length, "null_count": 0, "offset": 0, "buffers": buffers,
            "children": list(children)}


def ints(n, dtype=np.int64, validity=None):
    return arr(pa.from_numpy_dtype(dtype), n, [validity, frame(np.arange(n, dtype=dtype))])


def entries(keys, validity=None):
    t = pa.struct([pa.field("key", pa.int64(), nullable=False), ("value", pa.int64())])
    return arr(t, 2, [validity], [keys, ints(2)])
"""


@pytest.mark.parametrize(
    "meta",
    [
        # A dictionary type as plain buffers: pyarrow builds a DictionaryArray without its
        # dictionary ("Check failed: (data->dictionary) != (nullptr)", SIGABRT).
        "arr(pa.dictionary(pa.int32(), pa.string()), 3, [None, frame(np.array([0, 5, 10**5], np.int32))])",
        # Children whose type is not the one the parent type declares: list, fixed-size list and
        # run-end encoded constructors check the type id with ARROW_CHECK (SIGABRT).
        "arr(pa.list_(pa.int64()), 2, [None, frame(np.array([0, 1, 2], np.int32))], [ints(2, np.int32)])",
        "arr(pa.list_(pa.string()), 2, [None, frame(np.array([0, 1, 2], np.int32))], [ints(2)])",
        "arr(pa.list_(pa.string(), 1), 2, [None], [ints(2)])",
        "arr(pa.run_end_encoded(pa.int32(), pa.string()), 4, [None], [ints(2, np.int32), ints(2)])",
        "arr(pa.list_(pa.dictionary(pa.int32(), pa.string())), 2, [None, frame(np.array([0, 1, 2], np.int32))],"
        " [ints(2, np.int32)])",
        # Maps: null keys, null entries, entries that are not a struct (ARROW_CHECK_OK, SIGABRT).
        "arr(pa.map_(pa.int64(), pa.int64()), 1, [None, frame(np.array([0, 2], np.int32))],"
        " [entries(ints(2, validity=frame(np.array([0], np.uint8))))])",
        "arr(pa.map_(pa.int64(), pa.int64()), 1, [None, frame(np.array([0, 2], np.int32))],"
        " [entries(ints(2), validity=frame(np.array([1], np.uint8)))])",
        "arr(pa.map_(pa.int64(), pa.int64()), 1, [None, frame(np.array([0, 2], np.int32))], [ints(2)])",
        # Unions without their type ids (or offsets): Arrow's validate() passes them and its full
        # validation reads through the missing buffer (SIGSEGV).
        "arr(pa.union([pa.field('a', pa.int64())], 'sparse'), 2, [None, None], [ints(2)])",
        "arr(pa.union([pa.field('a', pa.int64())], 'dense'), 2, [None, frame(np.zeros(2, np.int8)), None], [ints(2)])",
    ],
    ids=[
        "dictionary-without-dictionary",
        "list-child-int32-for-int64",
        "list-child-int64-for-string",
        "fixed-size-list-child-type",
        "run-end-values-type",
        "list-of-dictionary-child-int",
        "map-null-keys",
        "map-null-entries",
        "map-entries-not-a-struct",
        "sparse-union-without-type-ids",
        "dense-union-without-offsets",
    ],
)
def test_arrow_arrays_arrow_would_crash_on_are_refused_before_it_builds_or_validates_them(meta):
    run_isolated(ARROW_FORGE, f"CASES = [('case', 'pyarrow.Array', {meta}, frames)]\n", ALL_REFUSED)


def test_arrow_arrays_the_child_checks_must_not_refuse_still_load():
    import pyarrow as pa

    keys = pa.Array.from_buffers(pa.int64(), 3, [pa.py_buffer(b"\x07"), pa.py_buffer(np.arange(3).tobytes())])
    values = [
        pa.array(["a" * 20, None, "short", "b" * 13], type=pa.string_view()),  # variadic buffers: by IPC
        pa.array([b"x" * 40, b""], type=pa.binary_view()),
        pa.MapArray.from_arrays([0, 1, 3], keys, pa.array([1, 2, 3])),  # keys with an all-valid bitmap
        pa.array([[(1, "a")], None, [(2, None)]], type=pa.map_(pa.int64(), pa.string())).slice(1),
        pa.array([{"d": "x"}, {"d": "y"}], pa.struct([("d", pa.string())])).cast(
            pa.struct([("d", pa.dictionary(pa.int8(), pa.string()))])
        ),
        pa.array([[[1], [2, 3]], None], pa.list_(pa.large_list(pa.int16()))),
    ]
    for value in values:
        out = freight.loads(freight.dumps(value), allow_pickle=False)
        assert out.equals(value), value.type


TORCH_CASES = """
import torch


def dense(a, dtype="torch.int64"):
    return {"data": np.asarray(a), "dtype": dtype, "device": "cpu", "requires_grad": False}


def sparse(layout="torch.sparse_coo", **change):
    meta = {"layout": layout, "indices": dense([[0, 1, 2], [0, 1, 2]]),
            "values": dense(np.ones(3, np.float32), "torch.float32"), "size": (4, 4), "coalesced": False,
            "device": "cpu", "requires_grad": False}
    meta.update(change)
    return meta


CASES = [(name, "torch.Tensor", meta, ()) for name, meta in [
    ("index-past-the-size", sparse(indices=dense([[0, 1, 9], [0, 1, 2]]))),
    ("negative-index", sparse(indices=dense([[0, -1, 2], [0, 1, 2]]))),
    ("int32-indices", sparse(indices=dense(np.array([[0, 1, 2]] * 2, np.int32), "torch.int32"))),
    ("float-indices-truncated", sparse(indices=dense([[0.0, 1.0, 3.99]] * 2, "torch.float64"))),
    ("nan-indices", sparse(indices=dense([[0.0, 1.0, np.nan]] * 2, "torch.float64"))),
    ("coalesced-lie", sparse(indices=dense([[2, 1, 1], [0, 1, 1]]), coalesced=True)),
    ("more-values-than-indices", sparse(values=dense(np.ones(5, np.float32), "torch.float32"))),
    ("negative-size", sparse(size=(-4, 4))),
    ("size-rank-short", sparse(size=(4,))),
    ("size-numel-overflow", sparse(size=(2**63 - 1, 2**63 - 1))),
    ("size-beyond-int64", sparse(size=(2**70, 4))),
    ("hybrid-values-without-dense-dim", sparse(values=dense(np.ones((3, 2), np.float32), "torch.float32"))),
    ("csr-index-past-the-size", sparse("torch.sparse_csr", indices=dense([[0, 1, 7], [0, 1, 2]]))),
    ("csr-of-3-sparse-dims", sparse("torch.sparse_csr", size=(4, 4, 4), indices=dense([[0, 1, 2]] * 3))),
    ("bsr-without-blocksize", sparse("torch.sparse_bsr")),
    ("bsr-blocksize-zero", sparse("torch.sparse_bsr", blocksize=(0, 0))),
    ("bsr-blocksize-not-tiling", sparse("torch.sparse_bsr", blocksize=(3, 3))),
    ("bsc-blocksize-beyond-int64", sparse("torch.sparse_bsc", blocksize=(2**70, 2))),
    ("bsr-blocksize-a-list", sparse("torch.sparse_bsr", blocksize="22")),
]]


def compressed(layout="torch.sparse_csr", pointers=(0, 1, 2, 2, 3), plain=(0, 1, 3), vals=None, size=(4, 4),
               dtypes=("torch.int64", "torch.int64")):
    np_dtypes = [getattr(np, d.split(".")[1]) for d in dtypes]
    return {"layout": layout, "compressed": dense(np.array(pointers, np_dtypes[0]), dtypes[0]),
            "plain": dense(np.array(plain, np_dtypes[1]), dtypes[1]),
            "values": vals or dense(np.ones(len(plain), np.float32), "torch.float32"),
            "size": size, "device": "cpu", "requires_grad": False}


CASES += [(name, "torch.Tensor", meta, ()) for name, meta in [
    # scipy's crasher shape: the last pointer 0 "prunes" the rest (checked in Rust first).
    ("pointers-pruned-to-zero", compressed(pointers=(0, 768, 2048, 3840, 0))),
    ("pointers-decreasing", compressed(pointers=(0, 2, 1, 2, 3))),
    ("pointers-past-the-indices", compressed(pointers=(0, 1, 2, 2, 9))),
    ("pointers-not-starting-at-0", compressed(pointers=(1, 1, 2, 2, 3))),
    ("too-few-pointers", compressed(pointers=(0, 1, 3))),
    # A size far beyond the pointers: converting COO would allocate one pointer per row.
    ("rows-beyond-the-pointers", compressed(size=(2**40, 4))),
    ("index-past-the-columns", compressed(plain=(0, 1, 4))),
    ("negative-index", compressed(plain=(0, -1, 3))),
    ("unsorted-within-a-row", compressed(pointers=(0, 2, 2, 2, 3), plain=(3, 1, 0))),
    ("repeated-within-a-row", compressed(pointers=(0, 2, 2, 2, 3), plain=(1, 1, 0))),
    ("index-dtypes-differ", compressed(dtypes=("torch.int32", "torch.int64"))),
    ("float-pointers", compressed(dtypes=("torch.float64", "torch.int64"))),
    ("values-for-fewer-indices", compressed(vals=dense(np.ones(2, np.float32), "torch.float32"))),
    ("negative-size", compressed(size=(-4, 4))),
    ("size-of-three-dims", compressed(size=(4, 4, 1))),
    ("size-beyond-int64", compressed(size=(2**70, 4))),
    ("csc-index-past-the-rows", compressed("torch.sparse_csc", plain=(0, 1, 7))),
    ("bsr-blocks-not-tiling", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 1), size=(4, 4),
                                         vals=dense(np.ones((2, 3, 3), np.float32), "torch.float32"))),
    ("bsr-block-index-past-the-block-columns", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 2),
                                                          vals=dense(np.ones((2, 2, 2), np.float32), "torch.float32"))),
    ("bsr-values-not-blocks", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 1))),
    ("unknown-layout", compressed("torch.sparse_xyz")),
]]
"""


def test_torch_sparse_indices_from_a_payload_are_refused_before_torch_kernels_see_them():
    # COO tensors are built with check_invariants=True (bounds, coalescing, sizes); CSR/CSC/BSR/BSC
    # index arrays are checked in Rust (freight_core::sparse) and then by check_invariants.
    run_isolated(TORCH_CASES, ALL_REFUSED)


@pytest.mark.filterwarnings("ignore:Sparse (BSR|BSC|CSR|CSC) tensor support is in beta:UserWarning")
def test_torch_compressed_sparse_tensors_round_trip_with_their_block_size_and_index_dtype():
    import torch

    # Before the fix: loads failed ("to_sparse_bsr() missing 1 required positional arguments").
    int32 = torch.sparse_csr_tensor(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32),
                                    torch.tensor([1.0, 2.0]), (2, 2), check_invariants=True)  # fmt: skip
    hybrid = torch.ones(3, 2, 4).to_sparse_csr(dense_dim=1)  # travels as COO
    blocked = [torch.eye(4).to_sparse_bsr((2, 2)), torch.arange(24.0).reshape(4, 6).to_sparse_bsc((2, 3))]
    for t in [*blocked, torch.eye(5).to_sparse_csr(), torch.zeros(0, 3).to_sparse_csc(), int32, hybrid]:
        out = freight.loads(freight.dumps(t), allow_pickle=False)
        assert out.layout == t.layout and out.values().shape == t.values().shape
        assert torch.equal(out.to_dense(), t.to_dense())
    assert int32.crow_indices().dtype == torch.int32


PANDAS_CASES = """
import pandas as pd


def series(values, n=5):
    return {"values": values, "index": {"range": (0, n, 1), "name": None}, "name": None, "attrs": {},
            "allows_duplicate_labels": True}


def sparse(**change):
    values = {"sparse": np.array([10, 20]), "indices": np.array([1, 3], np.int32), "length": 5, "fill": 0,
              "kind": "integer", "subtype": "int64"}
    values.update(change)
    return series(values)


def categorical(codes):
    categories = {"values": {"np": np.array([1.5, 2.5])}, "name": None}
    return series({"codes": codes, "categories": categories, "ordered": False}, len(codes))


CASES = [(name, "pandas.Series", meta, ()) for name, meta in [
    ("sparse-position-past-the-length", sparse(indices=np.array([1, 5], np.int32))),
    ("block-position-far-past-the-length", sparse(indices=np.array([1, 500000], np.int32), kind="block")),
    ("sparse-negative-position", sparse(indices=np.array([-1, 3], np.int32))),
    ("sparse-uint64-position", sparse(indices=np.array([1, 2**64 - 1], np.uint64))),
    ("sparse-float-positions", sparse(indices=np.array([1.0, 3.0]))),
    ("sparse-2d-positions", sparse(indices=np.array([[1, 3]], np.int32))),
    ("sparse-more-values-than-positions", sparse(sparse=np.array([10, 20, 30]))),
    ("sparse-negative-length", sparse(length=-5)),
    ("sparse-length-beyond-int32", sparse(length=2**40)),
    ("sparse-length-beyond-int64", sparse(length=2**70)),
    ("sparse-values-of-another-dtype", sparse(sparse=np.array([1.5, np.nan]))),
    ("sparse-shorter-than-the-index", dict(sparse(), index={"range": (0, 50, 1), "name": None})),
    ("category-code-past-the-categories", categorical(np.array([0, 5], np.int8))),
    ("category-code-below-minus-one", categorical(np.array([0, -2], np.int8))),
    ("category-code-wrapping-in-int8", categorical(np.array([0, 2**40], np.int64))),
    ("category-code-uint64", categorical(np.array([0, 2**64 - 1], np.uint64))),
    ("category-float-codes", categorical(np.array([0.0, 1.0]))),
]]

# Extension columns rebuilt by the dtype's __from_arrow__, which reads the Arrow buffers in the
# dtype's own layout (pyarrow_array_to_numpy_and_mask): an array of another type is refused.
import pyarrow as pa

strings = pa.chunked_array([pa.array(["x" * 50, "y" * 70, "z", "w"])])
CASES += [(name, "pandas.Series", series({"dtype": dtype, "arrow": arrow}, 4), ()) for name, dtype, arrow in [
    ("period-over-string-buffers", "period[D]", strings),
    ("interval-over-strings", "interval[int64, right]", strings),
    ("Int64-over-strings", "Int64", strings),
    ("boolean-over-int8", "boolean", pa.chunked_array([pa.array([1, 2, 3, 4], pa.int8())])),
]]
"""


def test_pandas_sparse_positions_and_category_codes_are_refused_before_pandas_indexes_with_them():
    # pandas' Cython take/sparse kernels index with these unchecked; before the fix, the values of
    # another dtype were cast silently (NaN to -9223372036854775808).
    run_isolated(PANDAS_CASES, ALL_REFUSED)


TENSORFLOW_CASES = """
import tensorflow as tf


def values(a, dtype="int32"):
    return {"dtype": dtype, "device": "", "data": np.asarray(a, dtype=dtype)}


def ragged(*levels):
    levels = [{"splits": np.asarray(s, dtype=np.int64) if isinstance(s, list) else s, "uniform": u}
              for s, u in levels]
    return "tensorflow.RaggedTensor", {"values": values(np.arange(6)), "levels": levels}


def sparse(indices, shape, vals=None):
    indices = np.asarray(indices, dtype=np.int64)
    return "tensorflow.SparseTensor", {"indices": indices, "shape": shape,
                                       "values": vals or values(np.arange(len(indices)))}


CASES = [(name, tag, meta, ()) for name, (tag, meta) in [
    ("splits-past-the-values", ragged(([0, 2, 60], None))),
    ("splits-short-of-the-values", ragged(([0, 2, 4], None))),
    ("splits-decreasing", ragged(([0, 5, 2, 6], None))),
    ("splits-not-starting-at-0", ragged(([1, 2, 6], None))),
    ("splits-negative", ragged(([0, -2, 6], None))),
    ("splits-float", ragged((np.array([0.0, 2.0, 6.0]), None))),
    ("splits-empty", ragged(([], None))),
    ("splits-2d", ragged((np.array([[0, 2, 6]]), None))),
    ("uniform-row-length-not-tiling", ragged(([0, 2, 4, 6], 5))),
    ("uniform-row-length-negative", ragged(([0, 2, 4, 6], -2))),
    ("uniform-row-length-beyond-int64", ragged(([0, 2, 4, 6], 2**70))),
    ("outer-splits-past-the-inner-rows", ragged(([0, 1, 9], None), ([0, 2, 6], None))),
    ("levels-of-mixed-dtypes", ragged((np.array([0, 1, 2], np.int32), None), ([0, 2, 6], None))),
    ("sparse-index-past-the-shape", sparse([[0, 1], [2, 30]], (4, 4))),
    ("sparse-negative-index", sparse([[0, -1], [2, 3]], (4, 4))),
    ("sparse-negative-shape", sparse(np.zeros((0, 2)), (-4, 4))),
    ("sparse-shape-beyond-int64", sparse(np.zeros((0, 2)), (2**70, 4))),
    ("sparse-index-rank-not-the-shape", sparse([[0, 1, 1]], (4, 4))),
    ("sparse-values-2d", sparse([[0, 1], [2, 3]], (4, 4), values(np.zeros((2, 2))))),
]]
"""


def test_tensorflow_ragged_splits_and_sparse_indices_are_refused_before_kernels_see_them():
    # from_row_splits(validate=True) and freight's own bounds check of SparseTensor indices.
    # Unsorted or repeated sparse indices load (TensorFlow allows unordered SparseTensors; its
    # kernels check the order where they need it and raise InvalidArgumentError).
    run_isolated(TENSORFLOW_CASES, ALL_REFUSED)
