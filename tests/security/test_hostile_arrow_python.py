"""Hostile payloads of the Python Arrow form (``freight.serializers.arrow_python``: what payloads of
earlier versions hold, which every version must still load safely), under the pyarrow and polars
tags: each must raise DeserializationError at load time, never crash the interpreter (now or at
the first use of what was loaded) or read out of bounds. The Rust form's forgeries are in
test_hostile_arrow_rust.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

import freight
from support.forging import bytes_retained_after_loading, forge, run_isolated

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
    arr = freight.loads(forge("pyarrow.Array", meta, frames), allow_pickle=False)
    # Before the fix: [1, 2, 666, 4] (validate(full=True) passes), and pc.is_null says no nulls.
    assert arr.to_pylist() == [1, 2, None, 4] and arr.null_count == 1


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


# -- arrays Arrow's own constructors or validation would crash on --------------------------------
# Each case was crafted by reading the serializer's load path (not only by random mutation) and
# run under glibc's heap checks and AddressSanitizer (see fuzz/loads_mutations.py --asan); a child
# loads every case and prints REFUSED when loading refused them all (support.forging.print_refusals).

ARROW_FORGE = """
import pyarrow as pa
from freight.serializers.arrow_python import type_wire as _type_wire

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
    run_isolated(ARROW_FORGE, f"print_refusals([('case', 'pyarrow.Array', {meta}, frames)])\n")


def test_arrow_arrays_the_child_checks_must_not_refuse_still_load():
    import pyarrow as pa

    from freight.serializers import arrow_python as farp

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
        # freight.dumps takes the Rust path now: the Python form, as earlier versions wrote it.
        meta, frames = farp.encode_array(value)
        out = freight.loads(forge("pyarrow.Array", meta, frames), allow_pickle=False)
        assert out.equals(value), value.type
