"""Hostile payloads for freight's Rust Arrow loader (``_freight.arrow_loads``, behind the pyarrow and
polars serializers), beyond the forgeries of test_arrow_rust.py: schemas that disagree with their
nodes, types at their limits, layouts pyarrow or polars trust on import, and metadata polars reads.
Each case states its outcome: loading raises DeserializationError, or it returns a value equal
to the one the case names, which is then safe to use. Cases that could crash the interpreter run
in a child interpreter. The first section holds what crashed, hung or loaded wrong
values before the fixes (null-slot string views, batches shorter than their columns, view padding, length bombs)."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import freight
from support import arrow_forging
from support.arrow_forging import dump, long_view, payload, schema_of, set_view
from support.forging import run_isolated

pl = pytest.importorskip("polars")


def _isolated(code: str, expect: str) -> None:
    """``code`` in a fresh interpreter (after the forging preludes): it must exit cleanly and print
    ``expect`` last (REFUSED, or LOADED and the value's Python form)."""
    run_isolated(arrow_forging.CHILD_PRELUDE, code, expect=expect)


REFUSED = "refused"  # a case's outcome: loading raises DeserializationError


def _check(blob: bytes, expected, use, same) -> None:
    """Loading ``blob`` raises DeserializationError when ``expected`` is REFUSED; otherwise it
    returns a value for which ``same(value, expected)`` holds, and ``use(value)`` runs on it
    without a crash or a panic."""
    if expected is REFUSED:
        with pytest.raises(freight.DeserializationError):
            freight.loads(blob, allow_pickle=False)
        return
    value = freight.loads(blob, allow_pickle=False)
    use(value)
    assert same(value, expected), value


def _same_arrow(value, expected) -> bool:
    """``expected``: the values as ``to_pylist`` gives them, or an array to compare type and buffers with."""
    if isinstance(expected, pa.Array):
        return value.type == expected.type and value.equals(expected)
    return value.to_pylist() == expected


def _same_polars(value, expected) -> bool:
    if isinstance(expected, pl.DataFrame):
        return value.schema == expected.schema and value.to_dicts() == expected.to_dicts()
    return value.dtype == expected.dtype and value.to_list() == expected.to_list()


def _attempt(*calls):
    """Each call may raise an ordinary exception (an unsupported kernel, a bad value); a
    PanicException (a BaseException) or a crash fails the test."""
    for call in calls:
        try:
            call()
        except Exception:  # noqa: BLE001, S112 - only crashes and panics matter here
            continue


def _use_arrow(value, polars=True):
    value.validate(full=True)
    _attempt(value.to_pylist, value.to_pandas, lambda: pc.unique(value), lambda: str(value))
    _attempt(lambda: value.take([0]), lambda: value.filter(pa.array([True] + [False] * (len(value) - 1))))
    if polars:
        _attempt(lambda: pl.from_arrow(value).to_list())


def _use_polars(value):
    _attempt(value.to_list, value.sort, value.unique, value.to_arrow, lambda: value.cast(pl.String), lambda: str(value))
    _attempt(lambda: value.filter(pl.Series([True] * len(value))), lambda: value == value)


def _i32(x):
    return struct.pack("<i", x)


def _patched(schema, old, new):
    assert schema.count(old) == 1, "the value to patch is not unique in the schema bytes"
    return schema.replace(old, new)


# -- bugs found, and fixed ---------------------------------------------------------------------------------


POLARS_VIEWS = {
    "huge view": "set_view(frames, nodes[0][3][0], 1, long_view(1 << 30, offset=1 << 30))",
    "negative length": "set_view(frames, nodes[0][3][0], 1, long_view(-1))",
    "missing buffer": "set_view(frames, nodes[0][3][0], 1, long_view(100, buffer=9))",
}


@pytest.mark.parametrize("view", list(POLARS_VIEWS))
def test_polars_string_view_null_slot_out_of_bounds(view):
    _isolated(
        f"""
        import polars as pl
        schema, nodes, frames = dump(pl.Series(["a value longer than twelve", None]))
        {POLARS_VIEWS[view]}
        refused, s = load_or_refuse(payload("polars.Series", schema, nodes, frames))
        if not refused:
            s.to_arrow(); s.str.contains("x"); s.str.to_uppercase(); s.str.len_chars()
        print("REFUSED" if refused else "LOADED")
        """,
        expect="REFUSED",
    )


def test_pyarrow_string_view_null_slot_out_of_bounds_then_polars():
    _isolated(
        """
        import polars as pl
        schema, nodes, frames = dump(pa.array(["a value longer than twelve", None, "x" * 20], pa.string_view()))
        set_view(frames, nodes[0][3][0], 1, long_view(1 << 30, offset=1 << 30))
        refused, arr = load_or_refuse(payload("pyarrow.Array", schema, nodes, frames))
        if not refused:
            arr.validate(full=True)
            pl.from_arrow(arr).str.to_uppercase()
        print("REFUSED" if refused else "LOADED")
        """,
        expect="REFUSED",
    )


@pytest.mark.parametrize("tag", ["pyarrow.Table", "pyarrow.RecordBatch"])
def test_a_batch_shorter_than_its_columns(tag):
    _isolated(
        f"""
        import numpy as np
        data = {{"a": np.arange(1000), "s": [str(i) for i in range(1000)]}}
        obj = pa.table(data) if "{tag}" == "pyarrow.Table" else pa.record_batch(data)
        schema, nodes, frames = dump(obj)
        nodes[0][0] = 2  # the struct (the batch) says 2 rows, its columns hold 1000
        refused, value = load_or_refuse(payload("{tag}", schema, nodes, frames))
        if not refused:
            table = value if isinstance(value, pa.Table) else pa.Table.from_batches([value])
            table.filter(pa.array([True, False]))  # segfaults
            value.validate(full=True)
        print("REFUSED" if refused else f"LOADED {{value.to_pydict()}}")
        """,
        # the batch's length wins: its first 2 rows
        expect="LOADED {'a': [0, 1], 's': ['0', '1']}",
    )


@pytest.mark.parametrize("tag", ["pyarrow.Array", "polars.Series"])
def test_string_view_inline_padding_not_zero(tag):
    obj = pa.array(["a", "a"], pa.string_view()) if tag == "pyarrow.Array" else pl.Series(["a", "a"])
    schema, nodes, frames = dump(obj)
    raw = bytearray(frames[nodes[0][3][0]])
    raw[16 + 5] = 0x41  # "a" inline, with a non-zero byte in its padding
    frames[nodes[0][3][0]] = bytes(raw)
    with pytest.raises(freight.DeserializationError, match="Utf8View is malformed"):
        freight.loads(payload(tag, schema, nodes, frames), allow_pickle=False)


BOMBS = {
    "null": "schema_of(pa.null()), [[L, 0, None, [], []]], []",
    "fixed_size_binary(0)": 'schema_of(pa.binary(0)), [[L, 0, None, [0], []]], [b""]',
    "run-end encoded": "schema_of(pa.run_end_encoded(pa.int64(), pa.int8())), "
    '[[L, 0, None, [], [[1, 0, None, [0], []], [1, 0, None, [1], []]]]], [struct.pack("<q", L), b"\\x07"]',
}


@pytest.mark.parametrize("kind", list(BOMBS))
def test_a_tiny_payload_of_a_huge_length(kind):
    _isolated(
        f"""
        L = 2**62
        schema, nodes, frames = {BOMBS[kind]}
        refused, arr = load_or_refuse(payload("pyarrow.Array", schema, nodes, frames))
        if not refused:
            arr.to_pylist()
        print("REFUSED" if refused else "LOADED")
        """,
        expect="REFUSED",
    )


# -- schemas at or beyond the limits of their types: refused -----------------------------------


def _schema_cases():
    sparse = pa.sparse_union([pa.field("a", pa.int8()), pa.field("b", pa.int8())], type_codes=[101, 102])
    union = [[2, 0, None, [0], [[2, 0, None, [1], []], [2, 0, None, [1], []]]]], [b"ff", b"\1\2"]
    fsb = schema_of(pa.binary(123456789)), [[2, 0, None, [0], []]], [b"x" * 16]
    fsl = schema_of(pa.list_(pa.int8(), 123456789)), [[2, 0, None, [], [[4, 0, None, [0], []]]]], [b"x" * 4]
    dec = lambda t, p: (_patched(schema_of(t), _i32(37), _i32(p)), [[1, 0, None, [0], []]], [b"\xff" * 32])  # noqa: E731
    width = lambda case, w: (_patched(case[0], _i32(123456789), _i32(w)), *case[1:])  # noqa: E731
    ints = lambda node: (schema_of(pa.int8()), [node], [b"x"])  # noqa: E731
    return {
        "fixed_size_binary of negative width": width(fsb, -4),
        "fixed_size_binary of width 2**31-1": width(fsb, 2**31 - 1),
        "fixed_size_list of negative size": width(fsl, -2),
        "fixed_size_list of size 2**31-1": width(fsl, 2**31 - 1),
        "decimal128 of precision 50": dec(pa.decimal128(37, 3), 50),
        "decimal256 of precision 99": dec(pa.decimal256(37, 3), 99),
        "decimal of negative precision": dec(pa.decimal128(37, 3), -1),
        "union type id 200": (_patched(schema_of(sparse), _i32(101), _i32(200)), *union),
        "union type id -1": (_patched(schema_of(sparse), _i32(101), _i32(-1)), *union),
        "union type ids repeated": (_patched(schema_of(sparse), _i32(101), _i32(102)), *union),
        "64 nested lists": (_nested(64), [[0, 0, None, [0], []]], [b""]),
        "200 nested lists": (_nested(200), [[0, 0, None, [0], []]], [b""]),
        "run ends of int16 overflowing": (
            schema_of(pa.run_end_encoded(pa.int16(), pa.int8())),
            [[40000, 0, None, [], [[1, 0, None, [0], []], [1, 0, None, [1], []]]]],
            [struct.pack("<h", -25536), b"\1"],
        ),
        "map with null keys": _map_with_null_keys(),
        "dictionary values with a child": (
            schema_of(pa.dictionary(pa.int32(), pa.string())),
            [[1, 0, None, [0], [[1, 0, None, [0, 0], [[1, 0, None, [0], []]]]]]],
            [b"\0" * 8],
        ),
        "a length of 2**64-1": ints([2**64 - 1, 0, None, [0], []]),
        "an offset of 2**64-1": ints([1, 2**64 - 1, None, [0], []]),
        "a length of 2**64": ints([2**64, 0, None, [0], []]),
        "a frame index of 2**64": ints([1, 0, None, [2**64], []]),
        "a negative offset": ints([1, -1, None, [0], []]),
    }


def _map_with_null_keys():
    schema, nodes, frames = dump(pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())))
    frames.append(b"\0")
    nodes[0][4][0][4][0][2] = len(frames) - 1  # the keys' validity: a null key
    return schema, nodes, frames


def _nested(depth):
    t = pa.int8()
    for _ in range(depth):
        t = pa.list_(t)
    return schema_of(t)


SCHEMA_CASES = _schema_cases()


@pytest.mark.parametrize("name", list(SCHEMA_CASES))
def test_forged_schemas_and_nodes_are_refused(name):
    schema, nodes, frames = SCHEMA_CASES[name]
    with pytest.raises(freight.FreightError):
        freight.loads(payload("pyarrow.Array", schema, nodes, frames), allow_pickle=False)


# -- layouts that load: safe to use -------------------------------------------------------------


def _edit(obj, change, tag="pyarrow.Array", schema=None):
    s, nodes, frames = dump(obj)
    change(nodes[0], frames)
    return payload(tag, schema or s, nodes, frames)


def _set_frame(frames, index, data):
    frames[index] = data


def _bits(frames, node, byte):
    frames.append(byte)
    node[2] = len(frames) - 1


LOADABLE = {
    "dictionary: a null slot's key out of range": (
        lambda: _edit(
            pa.array(["red", "blue", None, "red"]).dictionary_encode(),
            lambda n, f: _set_frame(f, n[3][0], np.array([0, 1, 1 << 30, 0], np.int32).tobytes()),
        ),
        ["red", "blue", None, "red"],
    ),
    "dictionary: values holding nulls": (
        lambda: _edit(
            pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int8()), pa.array(["x", None])), lambda n, f: None
        ),
        ["x", None, None],
    ),
    "validity at an offset not a multiple of 8": (
        lambda: _edit(
            pa.array([1, None, 3, 4, None, 6, 7, 8, 9, None, 11]), lambda n, f: n.__setitem__(slice(0, 2), [7, 3])
        ),
        [4, None, 6, 7, 8, 9, None],
    ),
    "one frame as both offsets and data": (
        lambda: _edit(
            pa.array(["abcdefgh", "ijklmnop"]),
            lambda n, f: (
                n[3].__setitem__(1, n[3][0]),
                _set_frame(f, n[3][0], np.array([0, 4, 8], np.int32).tobytes()),
            ),
        ),
        ["\0\0\0\0", "\x04\0\0\0"],
    ),
    "large_string: a null slot of invalid UTF-8": (
        lambda: _edit(
            pa.array(["ab", None, "cd"], pa.large_string()),
            lambda n, f: (
                _set_frame(f, n[3][0], np.array([0, 2, 6, 8], np.int64).tobytes()),
                _set_frame(f, n[3][1], b"ab\xf0\x9f\xf0\xffcd"),
            ),
        ),
        ["ab", None, "cd"],
    ),
    "list_view: overlapping views": (
        lambda: _edit(
            pa.ListViewArray.from_arrays(
                pa.array([0, 1, 0], pa.int32()), pa.array([3, 2, 1], pa.int32()), pa.array([1, 2, 3])
            ),
            lambda n, f: None,
        ),
        [[1, 2, 3], [2, 3], [1]],
    ),
    "run-end encoded: children at an offset": (
        lambda: _edit(
            pa.RunEndEncodedArray.from_arrays(pa.array([2, 5, 9], pa.int32()), pa.array(["a", None, "ccc"])),
            lambda n, f: (
                n.__setitem__(0, 3),
                n[4][0].__setitem__(slice(0, 2), [2, 1]),
                n[4][1].__setitem__(slice(0, 2), [2, 1]),
            ),
        ),
        [None, None, None],
    ),
    "struct: children longer than it, at an offset": (
        lambda: _edit(
            pa.array([{"a": i, "s": str(i)} for i in range(50)]), lambda n, f: n.__setitem__(slice(0, 2), [2, 3])
        ),
        [{"a": 3, "s": "3"}, {"a": 4, "s": "4"}],
    ),
    "sparse union: children longer than it": (
        lambda: _edit(
            pa.UnionArray.from_sparse(
                pa.array([i % 2 for i in range(9)], pa.int8()), [pa.array(range(9)), pa.array("abcdefghi")]
            ),
            lambda n, f: n.__setitem__(slice(0, 2), [2, 3]),
        ),
        ["d", 4],
    ),
    "map: duplicate keys under keys_sorted": (
        lambda: _edit(
            pa.array([[("a", 1), ("a", 2)]], pa.map_(pa.string(), pa.int64(), keys_sorted=True)), lambda n, f: None
        ),
        [[("a", 1), ("a", 2)]],
    ),
    "decimal128 of scale 120": (
        lambda: payload(
            "pyarrow.Array",
            _patched(schema_of(pa.decimal128(37, 3)), _i32(3), _i32(120)),
            [[1, 0, None, [0], []]],
            [b"\1" * 16],
        ),
        pa.Array.from_buffers(pa.decimal128(37, 120), 1, [None, pa.py_buffer(b"\1" * 16)]),
    ),
    "timestamp in an unknown time zone": (
        lambda: payload(
            "pyarrow.Array", schema_of(pa.timestamp("us", "Not/AZone")), [[1, 0, None, [0], []]], [b"\0" * 8]
        ),
        pa.Array.from_buffers(pa.timestamp("us", "Not/AZone"), 1, [None, pa.py_buffer(b"\0" * 8)]),
    ),
    "fixed_size_list of size 0": (
        lambda: payload(
            "pyarrow.Array", schema_of(pa.list_(pa.int8(), 0)), [[3, 0, None, [], [[0, 0, None, [0], []]]]], [b""]
        ),
        [[], [], []],
    ),
}


@pytest.mark.parametrize("name", list(LOADABLE))
def test_odd_but_valid_layouts_load_as_they_say_and_are_safe_to_use(name):
    # polars panics on any fixed_size_list of size 0, pyarrow's own included: not freight's to fix
    polars = name != "fixed_size_list of size 0"
    build, expected = LOADABLE[name]
    _check(build(), expected, lambda value: _use_arrow(value, polars), _same_arrow)


EXTENSIONS = {
    "fixed_shape_tensor: shape 100x100 over 4 values": ("arrow.fixed_shape_tensor", '{"shape":[100,100]}'),
    "fixed_shape_tensor: permutation out of range": ("arrow.fixed_shape_tensor", '{"shape":[2,2],"permutation":[5,9]}'),
    "fixed_shape_tensor: permutation repeated": ("arrow.fixed_shape_tensor", '{"shape":[2,2],"permutation":[0,0]}'),
    "fixed_shape_tensor: negative shape": ("arrow.fixed_shape_tensor", '{"shape":[-2,-2]}'),
    "fixed_shape_tensor: shape over 2**31": ("arrow.fixed_shape_tensor", '{"shape":[4294967296,1]}'),
    "uuid over fixed_size_list": ("arrow.uuid", ""),
    "bool8 over fixed_size_list": ("arrow.bool8", ""),
    "json over fixed_size_list": ("arrow.json", ""),
    "opaque with broken metadata": ("arrow.opaque", "{{{"),
}


@pytest.mark.parametrize("name", list(EXTENSIONS))
def test_extension_metadata_that_disagrees_with_its_storage_is_refused(name):
    ext, meta = EXTENSIONS[name]
    storage = pa.array([[1, 2, 3, 4]] * 3, pa.list_(pa.int64(), 4))
    md = {"ARROW:extension:name": ext, "ARROW:extension:metadata": meta}
    blob = _edit(storage, lambda n, f: None, schema=schema_of(storage.type, md))
    with pytest.raises(freight.DeserializationError, match="invalid pyarrow.Array"):
        freight.loads(blob, allow_pickle=False)


# -- polars: metadata it reads, layouts it imports ----------------------------------------------


def _polars_enum(metadata, change=lambda n, f: None):
    s, nodes, frames = dump(pl.Series(["red", "blue", None, "green"], dtype=pl.Enum(["red", "blue", "green"])))
    change(nodes[0], frames)
    t = pa.ipc.read_schema(pa.py_buffer(s)).field(0).type
    return payload(
        "polars.Series", pa.schema([pa.field("x", t, metadata=metadata)]).serialize().to_pybytes(), nodes, frames
    )


def _polars(obj, change, tag="polars.Series"):
    return _edit(obj, change, tag=tag)


POLARS = {
    "enum: fewer categories than dictionary values": (
        lambda: _polars_enum({"_PL_ENUM_VALUES2": "3;red"}),
        pl.Series(["red", None, None, None], dtype=pl.Enum(["red"])),
    ),
    "enum: a length beyond its text": (lambda: _polars_enum({"_PL_ENUM_VALUES2": "999;red4;blue"}), REFUSED),
    "enum: a negative length": (lambda: _polars_enum({"_PL_ENUM_VALUES2": "-5;red"}), REFUSED),
    "enum: no categories": (lambda: _polars_enum({"_PL_ENUM_VALUES2": ""}), pl.Series([None] * 4, dtype=pl.Enum([]))),
    "enum: repeated categories": (lambda: _polars_enum({"_PL_ENUM_VALUES2": "3;red3;red3;red"}), REFUSED),
    "enum: a key beyond its categories": (
        lambda: _polars_enum(
            {"_PL_ENUM_VALUES2": "3;red4;blue5;green"}, lambda n, f: _set_frame(f, n[3][0], bytes([0, 1, 0, 200]))
        ),
        REFUSED,
    ),
    "categorical: metadata garbage": (lambda: _polars_enum({"_PL_CATEGORICAL2": "99;99;u8;garbage"}), REFUSED),
    "categorical: metadata cut short": (lambda: _polars_enum({"_PL_CATEGORICAL2": "x"}), REFUSED),
    "categorical: a null dictionary value with a wild view": (
        lambda: _polars(
            pl.Series(["red", "blue", "green"], dtype=pl.Categorical),
            lambda n, f: (
                _bits(f, n[4][0], b"\xfd"),
                set_view(f, n[4][0][3][0], 1, long_view(1 << 30, offset=1 << 30)),
                _set_frame(f, n[3][0], np.array([0, 1, 2], np.uint32).tobytes()),
            ),
        ),
        REFUSED,
    ),
    "decimal of precision 39": (
        lambda: payload(
            "polars.Series",
            _patched(schema_of(pa.decimal128(37, 3)), _i32(37), _i32(39)),
            [[1, 0, None, [0], []]],
            [b"\1" * 16],
        ),
        REFUSED,
    ),
    "decimal256": (
        lambda: payload("polars.Series", schema_of(pa.decimal256(60, 3)), [[1, 0, None, [0], []]], [b"\1" * 32]),
        REFUSED,
    ),
    "datetime in an unknown time zone": (
        lambda: payload(
            "polars.Series", schema_of(pa.timestamp("us", "Not/AZone")), [[1, 0, None, [0], []]], [b"\0" * 8]
        ),
        REFUSED,
    ),
    "datetime at a +99:99 offset": (
        lambda: payload("polars.Series", schema_of(pa.timestamp("us", "+99:99")), [[1, 0, None, [0], []]], [b"\0" * 8]),
        REFUSED,
    ),
    "struct of no fields, 5 rows": (
        lambda: payload("polars.Series", schema_of(pa.struct([])), [[5, 0, None, [], []]], []),
        pl.Series([{}] * 5, dtype=pl.Struct({})),
    ),
    "struct of no fields, 2**40 rows": (
        lambda: payload("polars.Series", schema_of(pa.struct([])), [[2**40, 0, None, [], []]], []),
        REFUSED,
    ),
    "array of width 0 over values": (
        lambda: payload(
            "polars.Series", schema_of(pa.list_(pa.int64(), 0)), [[5, 0, None, [], [[0, 0, None, [0], []]]]], [b""]
        ),
        REFUSED,
    ),
    "struct with one field name twice": (
        lambda: payload(
            "polars.Series",
            schema_of(pa.struct([pa.field("a", pa.int64()), pa.field("a", pa.int64())])),
            [[1, 0, None, [], [[1, 0, None, [0], []], [1, 0, None, [0], []]]]],
            [b"\0" * 8],
        ),
        REFUSED,
    ),
    "struct with children longer than it": (
        lambda: _polars(
            pl.Series([{"a": i, "b": str(i)} for i in range(8)]), lambda n, f: n.__setitem__(slice(0, 2), [2, 5])
        ),
        pl.Series([{"a": 5, "b": "5"}, {"a": 6, "b": "6"}]),
    ),
    "boolean at an odd offset": (
        lambda: _polars(pl.Series([True, None, False] * 10), lambda n, f: n.__setitem__(slice(0, 2), [20, 7])),
        pl.Series([None, False, True] * 6 + [None, False]),
    ),
    "list at an offset": (
        lambda: _polars(pl.Series([[1, 2], None, [3, 4, 5], []] * 3), lambda n, f: n.__setitem__(slice(0, 2), [5, 7])),
        pl.Series([[], [1, 2], None, [3, 4, 5], []]),
    ),
    "array at an offset, validity too short": (
        lambda: _polars(
            pl.Series([[1, 2], None, [3, 4], [5, 6]] * 3, dtype=pl.Array(pl.Int64, 2)),
            lambda n, f: n.__setitem__(slice(0, 2), [5, 7]),
        ),
        REFUSED,
    ),
    "data frame: columns of unequal lengths": (
        lambda: _polars(
            pl.DataFrame({"a": range(50), "s": [str(i) for i in range(50)]}),
            lambda n, f: (n.__setitem__(0, 2), n[4][1].__setitem__(0, 5)),
            tag="polars.DataFrame",
        ),
        pl.DataFrame({"a": [0, 1], "s": ["0", "1"]}),
    ),
    "data frame: nulls in its struct": (
        lambda: _polars(pl.DataFrame({"a": [1, 2, 3]}), lambda n, f: _bits(f, n, b"\x05"), tag="polars.DataFrame"),
        pl.DataFrame({"a": [1, None, 3]}),
    ),
    "data frame of a non-struct": (
        lambda: _polars(pl.Series([1, 2, 3]), lambda n, f: None, tag="polars.DataFrame"),
        REFUSED,
    ),
}


@pytest.mark.parametrize("name", list(POLARS))
def test_forged_polars_payloads_are_refused_or_load_as_they_say(name):
    def use(value):
        if isinstance(value, pl.DataFrame):
            _attempt(
                value.to_dicts, lambda: value.sort(value.columns[0]), value.unique, value.to_arrow, lambda: str(value)
            )
        else:
            _use_polars(value)

    build, expected = POLARS[name]
    _check(build(), expected, use, _same_polars)


def test_string_view_null_slots_are_checked_like_values():
    """A null slot's view is checked as any other (polars reads every view): a wild one is refused."""
    schema, nodes, frames = dump(pa.array(["a value longer than twelve", None, "x" * 20], pa.string_view()))
    set_view(frames, nodes[0][3][0], 1, long_view(1 << 30, buffer=5, offset=1 << 30))
    with pytest.raises(freight.DeserializationError):
        freight.loads(payload("pyarrow.Array", schema, nodes, frames), allow_pickle=False)
