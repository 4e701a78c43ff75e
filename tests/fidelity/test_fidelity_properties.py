"""Property tests: for generated numpy arrays (every dtype kind, nested structs, zero itemsizes,
datetimes of every unit, both byte orders, any layout), masked arrays, Arrow arrays (nested and
extension types) and scipy.sparse matrices, freight's round trip gives what pickle's gives
(``support.fidelity.assert_same``).

Examples per property: ``FREIGHT_FIDELITY_EXAMPLES`` (default 40: 160 in all, a few
seconds, for ``make test``); a long run sets it higher (``make fuzz``).
"""

from __future__ import annotations

import decimal
import os
import warnings

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings

import freight
from support.fidelity import assert_like_pickle, assert_same, pickle_roundtrip

EXAMPLES = int(os.environ.get("FREIGHT_FIDELITY_EXAMPLES", "40"))
fidelity = settings(max_examples=EXAMPLES)

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")

# --------------------------------------------------------------------------------------------
# numpy dtypes and arrays
# --------------------------------------------------------------------------------------------

UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
byte_orders = st.sampled_from("<>")

numeric_dtypes = st.builds(
    lambda code, order: np.dtype(code).newbyteorder(order), st.sampled_from("?bhilqBHILQefdgFDG"), byte_orders
)
time_dtypes = st.builds(
    lambda kind, unit, step, order: np.dtype(f"{order}{kind}8" + (f"[{step}{unit}]" if unit else "")),
    st.sampled_from("Mm"),
    st.sampled_from([*UNITS, ""]),  # "" is the generic unit
    st.sampled_from(["", "1", "5", "25"]),
    byte_orders,
)
flexible_dtypes = st.builds(
    lambda kind, size, order: np.dtype(f"{order}{kind}{size}"), st.sampled_from("SUV"), st.integers(0, 5), byte_orders
)
with_metadata = st.builds(lambda d: np.dtype(d, metadata={"unit": "m"}), numeric_dtypes)
leaf_dtypes = st.one_of(numeric_dtypes, time_dtypes, flexible_dtypes, with_metadata)


@st.composite
def struct_dtypes(draw, children):
    """A struct of 1-4 fields: packed, aligned, or with padding and reordered offsets; titles
    sometimes; fields of any dtype, sub-arrays (zero-sized ones too) and nested structs."""
    n = draw(st.integers(1, 4))
    names = [f"f{i}" for i in range(n)]
    formats = []
    for _ in range(n):
        child = draw(children)
        if child.itemsize and draw(st.booleans()) and draw(st.booleans()):
            child = np.dtype((child, draw(st.sampled_from([(0,), (2,), (1, 3)]))))
        formats.append(child)
    style = draw(st.sampled_from(["packed", "aligned", "padded"]))
    if style == "packed":
        return np.dtype(list(zip(names, formats)))
    if style == "aligned":
        return np.dtype(list(zip(names, formats)), align=True)
    offsets, end = [], 0
    for f in formats:
        end += draw(st.integers(0, 3))
        offsets.append(end)
        end += f.itemsize
    order = draw(st.permutations(range(n)))
    spec = {
        "names": [names[i] for i in order],
        "formats": [formats[i] for i in order],
        "offsets": [offsets[i] for i in order],
        "itemsize": end + draw(st.integers(0, 4)),
    }
    if draw(st.booleans()):
        spec["titles"] = [f"title {names[i]}" for i in order]
    return np.dtype(spec)


array_dtypes = st.recursive(leaf_dtypes, lambda children: struct_dtypes(children), max_leaves=6)


def _array_of(dtype: np.dtype, shape: tuple[int, ...], data: bytes) -> np.ndarray:
    if dtype.itemsize == 0:
        return np.ndarray(shape, dtype)
    count = int(np.prod(shape))
    arr = np.frombuffer(bytearray(data[: count * dtype.itemsize]), dtype=dtype, count=count).reshape(shape)
    _generic_datetimes_to_nat(arr)
    return arr


def _generic_datetimes_to_nat(arr: np.ndarray) -> None:
    """numpy cannot print a datetime64 of generic unit other than NaT, and Hypothesis prints
    what it draws: those hold NaT (other units cover the bit patterns)."""
    if arr.dtype.names is not None:
        for name in arr.dtype.names:
            _generic_datetimes_to_nat(arr[name])
    elif arr.dtype.kind == "M" and np.datetime_data(arr.dtype)[0] == "generic":
        arr[...] = np.datetime64("NaT")


@st.composite
def arrays(draw, dtypes=array_dtypes, max_bytes=2048):
    """Arrays of any bit pattern (NaN payloads, NaT, invalid code points, padding), in any
    layout: C, Fortran, strided, reversed, transposed, broadcast, read-only; 0-d and empty."""
    dtype = draw(dtypes)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    while shape and int(np.prod(shape)) * dtype.itemsize > max_bytes:
        shape = shape[:-1]
    data = draw(st.binary(min_size=max_bytes, max_size=max_bytes))
    arr = _array_of(dtype, shape, data)
    layout = draw(st.sampled_from(["C", "F", "strided", "reversed", "T", "broadcast", "readonly"]))
    if layout == "F":
        arr = np.asfortranarray(arr) if arr.ndim else arr
    elif layout == "strided" and arr.ndim:
        arr = arr[..., ::2]
    elif layout == "reversed" and arr.ndim:
        arr = arr[::-1]
    elif layout == "T":
        arr = arr.T
    elif layout == "broadcast":
        arr = np.broadcast_to(arr, (2, *arr.shape))
    elif layout == "readonly":
        arr.flags.writeable = False
    return arr


@fidelity
@given(arr=arrays(), as_scalar=st.booleans())
def test_numpy_arrays_come_back_as_pickle_brings_them_back(arr, as_scalar):
    if as_scalar and arr.ndim == 0:
        try:
            scalar = arr[()]  # a numpy scalar of the same dtype
        except SystemError:  # 'U' bytes that no str can hold
            assume(False)
        assert_like_pickle(scalar)
    else:
        assert_like_pickle(arr)


# --------------------------------------------------------------------------------------------
# numpy masked arrays
# --------------------------------------------------------------------------------------------

masked_dtypes = st.one_of(
    numeric_dtypes,
    # Not the units numpy has no default fill for (generic, multiples): it stores the text '?',
    # which pickle cannot load back, once anything (Hypothesis' printing) reads the fill value.
    # test_fidelity_cases has that one.
    time_dtypes.filter(lambda d: not isinstance(np.ma.default_fill_value(d), str)),
    flexible_dtypes.filter(lambda d: d.kind != "V"),
    st.just(np.dtype([("a", "<i2"), ("b", [("c", ">f8"), ("d", "S2")])])),
    st.just(np.dtype(object)),
)


@st.composite
def masked_arrays(draw):
    """Masked arrays with no mask, a full one, a random one (per field for structs), every
    state of the fill value (never read, read as the default, set from a value), hard or soft
    masks, Fortran data, and np.matrix data."""
    dtype = draw(masked_dtypes)
    if dtype.hasobject:
        shape = draw(st.sampled_from([(), (3,), (2, 2)]))
        data = np.empty(shape, dtype=object)
        for i, v in enumerate(
            draw(
                st.lists(
                    st.one_of(st.integers(), st.text(max_size=3), st.none()), min_size=data.size, max_size=data.size
                )
            )
        ):
            data.flat[i] = v
    else:
        data = draw(arrays(st.just(dtype), max_bytes=256).filter(lambda a: a.ndim and a.flags.writeable))
    if draw(st.booleans()) and data.ndim == 2 and dtype.kind in "biufc":
        data = np.asmatrix(data)
    mask_kind = draw(st.sampled_from(["nomask", "full", "random"]))
    if mask_kind == "nomask":
        mask = np.ma.nomask
    else:
        mdtype = np.ma.make_mask_descr(dtype)
        bits = draw(st.binary(min_size=data.size * mdtype.itemsize, max_size=data.size * mdtype.itemsize))
        mask = (
            np.frombuffer(bytes(b & 1 for b in bits), mdtype).reshape(data.shape)
            if data.size
            else np.zeros(data.shape, mdtype)
        )
        if mask_kind == "full":
            mask = np.ones(data.shape, mdtype)
    m = np.ma.array(data, mask=mask, hard_mask=draw(st.booleans()))
    fill = draw(st.sampled_from(["unset", "default", "value"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns on some casts of fill values
        if fill == "default":
            _ = m.fill_value
        elif fill == "value" and data.size:
            try:
                m.fill_value = np.ma.getdata(m).flat[draw(st.integers(0, data.size - 1))]
            except (TypeError, ValueError, SystemError):  # SystemError: 'U' bytes no str can hold
                assume(False)
    return m


@fidelity
@given(m=masked_arrays())
def test_masked_arrays_come_back_as_pickle_brings_them_back(m):
    assert_like_pickle(m)


# --------------------------------------------------------------------------------------------
# Arrow
# --------------------------------------------------------------------------------------------


class BoxType(pa.ExtensionType):
    """A Python extension type over any storage, never registered."""

    def __init__(self, storage: pa.DataType):
        super().__init__(storage, "freight.fidelity.box")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls(storage_type)


class TagType(BoxType):
    """The same, registered (by the fixture below) under its own name."""

    def __init__(self, storage: pa.DataType):
        pa.ExtensionType.__init__(self, storage, "freight.fidelity.tag")


@pytest.fixture(scope="module", autouse=True)
def _tag_registered():
    pa.register_extension_type(TagType(pa.int8()))
    yield
    pa.unregister_extension_type("freight.fidelity.tag")


_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_TIMES = {
    pa.time32("s"): 86400,
    pa.time32("ms"): 86400 * 10**3,
    pa.time64("us"): 86400 * 10**6,
    pa.time64("ns"): 86400 * 10**9,
}
leaf_types = st.sampled_from(
    [
        *_INTS, pa.float32(), pa.float64(), pa.bool_(), pa.null(), pa.string(), pa.large_string(), pa.binary(),
        pa.large_binary(), pa.binary(3), pa.string_view(), pa.binary_view(), pa.date32(), pa.decimal128(7, 2),
        pa.decimal256(40, 5), pa.month_day_nano_interval(), pa.dictionary(pa.int32(), pa.string()), *_TIMES,
        *(pa.timestamp(u, tz) for u in ("s", "ms", "us", "ns") for tz in (None, "UTC", "Europe/Paris")),
        *(pa.duration(u) for u in ("s", "ms", "us", "ns")),
    ]
)  # fmt: skip


def _nested(children):
    return st.one_of(
        st.builds(pa.list_, children),
        st.builds(pa.large_list, children),
        st.builds(lambda t: pa.list_(t, 2), children),
        st.builds(
            lambda ts: pa.struct([(f"f{i}", t) for i, t in enumerate(ts)]), st.lists(children, min_size=1, max_size=3)
        ),
        st.builds(lambda t: pa.map_(pa.string(), t), children),
    )


# Extension types over leaf storage only, though anywhere in a nested type: arrays cast to an
# extension over nested storage (a list, a struct, another extension) aborted the process now
# and then, in pyarrow alone (26.0, without freight). test_fidelity_cases has a struct one.
arrow_types = st.recursive(
    st.one_of(leaf_types, st.builds(BoxType, leaf_types), st.builds(TagType, leaf_types), st.just(pa.uuid())),
    _nested,
    max_leaves=4,
)


def _storage(t: pa.DataType) -> pa.DataType:
    """``t`` with every extension type replaced by its storage (pa.array cannot build nested
    extension values; the array is built for this type, then cast to ``t``)."""
    if isinstance(t, pa.BaseExtensionType):
        return _storage(t.storage_type)
    if pa.types.is_map(t):
        return pa.map_(_storage(t.key_type), _storage(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _storage(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_storage(t.value_type), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(_storage(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_storage(t.value_type))
    return t


def values(t: pa.DataType) -> st.SearchStrategy:
    """Python values of storage type ``t`` (None sometimes)."""
    if pa.types.is_null(t):
        return st.none()
    if pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        base = st.integers(int(info.min), int(info.max))
    elif t in _TIMES:
        base = st.integers(0, _TIMES[t] - 1)
    elif pa.types.is_timestamp(t) or pa.types.is_duration(t):
        base = st.integers(-(2**50), 2**50)
    elif pa.types.is_floating(t):
        base = st.floats(width=t.bit_width)
    elif pa.types.is_boolean(t):
        base = st.booleans()
    elif pa.types.is_fixed_size_binary(t):
        base = st.binary(min_size=t.byte_width, max_size=t.byte_width)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        base = st.binary(max_size=20)
    elif (
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_dictionary(t)
    ):
        base = st.text(max_size=20)
    elif pa.types.is_date32(t):
        base = st.dates()
    elif pa.types.is_decimal(t):
        base = st.integers(-(10**t.precision) + 1, 10**t.precision - 1).map(
            lambda n: decimal.Decimal(f"{n}E-{t.scale}")
        )
    elif pa.types.is_interval(t):
        base = st.tuples(
            st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
        )
    elif pa.types.is_map(t):
        base = st.lists(st.tuples(st.text(max_size=3), values(t.item_type)), max_size=3)
    elif pa.types.is_struct(t):
        base = st.fixed_dictionaries({t.field(i).name: values(t.field(i).type) for i in range(t.num_fields)})
    elif pa.types.is_fixed_size_list(t):
        base = st.lists(values(t.value_type), min_size=t.list_size, max_size=t.list_size)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        base = st.lists(values(t.value_type), max_size=3)
    else:
        raise AssertionError(f"no values for {t}")
    return st.one_of(st.none(), base)


@st.composite
def arrow_objects(draw):
    """An array of any generated type (sliced sometimes), as an Array, a ChunkedArray, a
    column of a Table or RecordBatch, or its Schema."""
    t = draw(arrow_types)
    vals = draw(st.lists(values(_storage(t)), max_size=6))
    arr = pa.array(vals, _storage(t)).cast(t)
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        # pyarrow builds a null struct over a dictionary child as index 0 into an empty
        # dictionary, which its own full validation refuses, and so does freight's loader.
        assume(False)
    if len(arr) > 1 and draw(st.booleans()):
        arr = arr.slice(1)
    holder = draw(st.sampled_from(["array", "chunked", "table", "batch", "schema"]))
    if holder == "chunked":
        return pa.chunked_array([arr, arr.slice(len(arr) // 2)], type=t)
    if holder == "table":
        return pa.table({"x": arr, "n": pa.array(range(len(arr)))}).replace_schema_metadata({"k": "v"})
    if holder == "batch":
        return pa.record_batch({"x": arr})
    if holder == "schema":
        return pa.schema([pa.field("x", t)])
    return arr


@fidelity
@given(obj=arrow_objects())
def test_arrow_objects_come_back_as_pickle_brings_them_back(obj):
    assert_like_pickle(obj)


# --------------------------------------------------------------------------------------------
# scipy.sparse
# --------------------------------------------------------------------------------------------

SPARSE_DTYPES = ["?", "i1", "u2", "i4", "i8", "u8", "f4", "f8", "g", "F", "D", "G"]
_TWO_D = [f"{fmt}_{kind}" for fmt in ("csr", "csc", "coo", "bsr", "dia", "lil", "dok") for kind in ("matrix", "array")]


@st.composite
def sparse_matrices(draw):
    """Any format (matrix and array API), supported dtype and density; coo arrays of 1 to 3
    dimensions and 1-D csr arrays; unsorted indices and duplicates; a maxprint of its own."""
    name = draw(st.sampled_from([*_TWO_D, "coo_array_nd", "csr_array_1d"]))
    dtype = np.dtype(draw(st.sampled_from(SPARSE_DTYPES)))
    ndim = {"coo_array_nd": draw(st.integers(1, 3)), "csr_array_1d": 1}.get(name, 2)
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    if name.startswith("bsr"):
        shape = tuple(2 * d for d in shape)
    dense = np.zeros(shape, dtype)
    if dense.size:
        hits = draw(st.lists(st.integers(0, dense.size - 1), max_size=dense.size))
        flat = dense.reshape(-1)
        flat[hits] = np.arange(1, len(hits) + 1).astype(dtype)
    cls = getattr(sp, name.rsplit("_", 1)[0] if name.endswith(("_nd", "_1d")) else name)
    m = cls(dense, blocksize=(2, 2)) if name.startswith("bsr") and dense.size else cls(dense)
    if name.startswith("csr") and ndim == 2 and shape[1] and draw(st.booleans()):
        # Unsorted columns and duplicates in the first row (what adding parts leaves).
        cols = draw(st.lists(st.integers(0, shape[1] - 1), min_size=1, max_size=4))
        rows = [0] * len(cols) + [len(cols)] * shape[0]
        m = cls((np.arange(1, len(cols) + 1).astype(dtype), cols, rows[len(cols) - 1 :]), shape=shape)
    if draw(st.booleans()):
        m.maxprint = draw(st.integers(1, 100))
    return m


@fidelity
@given(m=sparse_matrices())
def test_sparse_matrices_come_back_as_pickle_brings_them_back(m):
    got = assert_like_pickle(m)
    assert got.nnz == m.nnz
    if m.format != "dok":  # freight has no native form for dok (a dict): pickle carries it
        assert_same(pickle_roundtrip(m), freight.loads(freight.dumps(m), allow_pickle=False))
