"""The one comparison the fidelity tests use (tests/fidelity/): freight's round trip must give
what pickle's gives, type and dtype included, and a value pickle itself cannot round-trip is no
test of freight. tests/fidelity/test_fidelity_compare.py shows that it notices each kind of
difference it claims to check (a helper that passed anything would make every fidelity test
pass).

Where freight keeps more than pickle, the comparison is with the original: a masked array's
``hardmask`` (pickle drops it, freight keeps it; see ``test_beyond_pickle.py``).
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
import xarray as xr

import freight


def pickle_roundtrip(obj: Any) -> Any:
    # (Loading a masked array casts its fill value to the data's dtype, which warns on overflow:
    # a float16 array's default fill 1e20 becomes inf.)
    with np.errstate(over="ignore", invalid="ignore"):
        return pickle.loads(pickle.dumps(obj, protocol=5))


def assert_like_pickle(obj: Any, **loads_options: Any) -> Any:
    """Round-trips ``obj`` through freight and through pickle and asserts the results are the
    same (see ``assert_same``). Returns freight's result."""
    expected = pickle_roundtrip(obj)
    got = freight.loads(freight.dumps(obj), **loads_options)
    assert_same(expected, got, original=obj)
    return got


def dtype_signature(dtype: np.dtype) -> Any:
    """Everything that tells two dtypes apart, recursively: ``==`` ignores metadata and the
    aligned-struct flag, and a user-defined dtype's ``str`` is a plain ``'<V8'``."""
    fields = None
    if dtype.names is not None:
        fields = [(name, dtype_signature(dtype.fields[name][0]), dtype.fields[name][1:]) for name in dtype.names]
    sub = None if dtype.subdtype is None else (dtype_signature(dtype.subdtype[0]), dtype.subdtype[1])
    metadata = None if dtype.metadata is None else dict(dtype.metadata)
    return (type(dtype), dtype.str, dtype.char, dtype.itemsize, dtype.isalignedstruct, metadata, fields, sub)


def _array_same(expected: np.ndarray, got: np.ndarray, path: str, original: Any = None) -> None:
    """Type, dtype, shape, layout and values as pickle gives them, with two exceptions where
    freight keeps what pickle loses (for the arrays it encodes itself; those it hands to pickle
    come back as pickle has them): the byte order of an array numpy's unpickling copies (a
    non-contiguous or empty big-endian array comes back native-endian, with the same values),
    and read-only arrays (pickle makes them writeable)."""
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    if dtype_signature(got.dtype) != dtype_signature(expected.dtype):
        native = dtype_signature(got.dtype.newbyteorder("=")) == dtype_signature(expected.dtype.newbyteorder("="))
        kept = isinstance(original, np.ndarray) and got.dtype == original.dtype
        assert native and kept, f"{path}: dtype {got.dtype!r} != {expected.dtype!r}"
    assert got.shape == expected.shape, f"{path}: shape {got.shape} != {expected.shape}"
    if got.size:  # numpy gives empty arrays strides of 0 or of the item size, as it goes
        assert got.strides == expected.strides, f"{path}: strides {got.strides} != {expected.strides}"
    for flag in ("C_CONTIGUOUS", "F_CONTIGUOUS"):
        assert got.flags[flag] == expected.flags[flag], f"{path}: flag {flag} is {got.flags[flag]}"
    writeable = {expected.flags.writeable}
    if isinstance(original, np.ndarray):
        writeable.add(original.flags.writeable)
    assert got.flags.writeable in writeable, f"{path}: writeable is {got.flags.writeable}"
    _values_same(expected, got, path)


def _values_same(reference: np.ndarray, got: np.ndarray, path: str) -> None:
    if reference.dtype.names is not None:
        # Field by field: a copy of a strided struct array (pickle's and freight's alike) leaves
        # the padding between fields uninitialised, so padding is no part of the value.
        for name in reference.dtype.names:
            _values_same(reference[name], got[name], f"{path}[{name!r}]")
    elif reference.dtype.char in "gG":
        # long doubles: 10 of their 16 bytes hold the value, the rest is padding, which
        # numpy's conversions between byte orders (pickle's load) leave undefined.
        assert np.array_equal(got, reference, equal_nan=True), f"{path}: values differ"
        assert (np.signbit(got.real) == np.signbit(reference.real)).all(), f"{path}: signs differ"
    elif reference.dtype.hasobject:
        for i, (e, g) in enumerate(zip(reference.ravel(order="K").tolist(), got.ravel(order="K").tolist())):
            assert_same(e, g, path=f"{path}.flat[{i}]")
    else:
        if got.dtype.byteorder != reference.dtype.byteorder and got.dtype.itemsize:
            # The same values in the other byte order (see _array_same): swapped, not cast
            # (numpy casts a generic datetime64 between byte orders without swapping).
            got = got.byteswap().view(reference.dtype)
        # Raw bytes: exact for every other dtype (NaN payloads, -0.0, NaT, invalid code points).
        assert got.tobytes(order="C") == reference.tobytes(order="C"), f"{path}: values differ"


def _masked_same(expected: np.ma.MaskedArray, got: np.ma.MaskedArray, original: Any, path: str) -> None:
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    assert got._baseclass is expected._baseclass, f"{path}: baseclass {got._baseclass} != {expected._baseclass}"
    data = np.ma.getdata(original) if isinstance(original, np.ma.MaskedArray) else None
    _array_same(np.ma.getdata(expected), np.ma.getdata(got), f"{path}.data", data)
    mask = np.ma.getmaskarray(original) if isinstance(original, np.ma.MaskedArray) else None
    _array_same(np.ma.getmaskarray(expected), np.ma.getmaskarray(got), f"{path}.mask", mask)
    assert (got._mask is np.ma.nomask) == (expected._mask is np.ma.nomask), f"{path}: nomask differs"
    # (The original's fill_value is not read: reading it stores the default.) When the data
    # kept a byte order pickle's lost, so does the fill: numpy's setter casts it to the data's.
    kept = dtype_signature(got.dtype) != dtype_signature(expected.dtype)
    fill_original = np.zeros((), got.dtype) if kept else None
    assert_same(expected._fill_value, got._fill_value, f"{path}._fill_value", fill_original)
    assert_same(expected.fill_value, got.fill_value, f"{path}.fill_value", fill_original)
    assert got._sharedmask == expected._sharedmask, f"{path}: sharedmask {got._sharedmask}"
    if isinstance(original, np.ma.MaskedArray):
        assert got.hardmask == original.hardmask, f"{path}: hardmask {got.hardmask} != {original.hardmask}"


def _arrow_rows(arr: Any) -> list[Any]:
    """The values of an Arrow array, one comparable Python value per element, whatever the
    chunks: floats as their bits (NaN == NaN, -0.0 != 0.0), temporal values as integers
    (``to_pylist`` refuses timestamps outside Python's range), dictionaries decoded, nulls as
    None (whatever bytes lie under them)."""
    if isinstance(arr, pa.ChunkedArray):
        return [row for chunk in arr.chunks for row in _arrow_rows(chunk)]
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        rows = _arrow_rows(arr.storage)
    elif pa.types.is_dictionary(t):
        rows = _arrow_rows(arr.dictionary_decode())
    elif pa.types.is_struct(t):
        columns = [_arrow_rows(arr.field(i)) for i in range(t.num_fields)]
        rows = list(zip(*columns)) if columns else [()] * len(arr)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_fixed_size_list(t):
        # By offsets, not flatten(): no kernel flattens maps of extension items, and it gave
        # garbage for a list of an extension over string_view (pyarrow 26).
        if pa.types.is_fixed_size_list(t):
            offsets = np.arange(arr.offset, arr.offset + len(arr) + 1) * t.list_size
        else:
            offsets = arr.offsets.to_numpy()
        start = int(offsets[0])
        items = _arrow_rows(arr.values.slice(start, int(offsets[-1]) - start))
        rows = [tuple(items[a - start : b - start]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    elif pa.types.is_temporal(t) and not pa.types.is_interval(t):
        rows = arr.cast(pa.int64() if t.bit_width == 64 else pa.int32()).to_pylist()
    elif pa.types.is_floating(t):
        rows = [None if v is None else struct.pack("<d", v) for v in arr.to_pylist()]
    else:
        rows = arr.to_pylist()
    return [row if valid else None for row, valid in zip(rows, arr.is_valid().to_pylist())]


def _arrow_same(expected: Any, got: Any, path: str) -> None:
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    if isinstance(expected, pa.Schema):
        assert got.equals(expected, check_metadata=True), f"{path}: schema {got} != {expected}"
        assert [type(t) for t in got.types] == [type(t) for t in expected.types], f"{path}: type classes differ"
        return
    if isinstance(expected, (pa.Table, pa.RecordBatch)):
        _arrow_same(expected.schema, got.schema, f"{path}.schema")
        assert got.num_rows == expected.num_rows, f"{path}: rows {got.num_rows} != {expected.num_rows}"
        for name, e, g in zip(expected.column_names, expected.columns, got.columns):
            _arrow_same(e, g, f"{path}[{name!r}]")
        return
    assert type(got.type) is type(expected.type), f"{path}: type class {type(got.type)} != {type(expected.type)}"
    assert got.type == expected.type, f"{path}: type {got.type} != {expected.type}"
    assert len(got) == len(expected) and got.null_count == expected.null_count, f"{path}: length or nulls"
    if isinstance(expected, pa.ExtensionArray):
        assert type(got) is type(expected), f"{path}: array class {type(got)}"
        _arrow_same(expected.storage, got.storage, f"{path}.storage")
        return
    assert _arrow_rows(got) == _arrow_rows(expected), f"{path}: values differ"


_SPARSE_ARRAYS = ("data", "indices", "indptr", "offsets", "row", "col")


def _sparse_same(expected: Any, got: Any, path: str) -> None:
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    assert got.shape == expected.shape, f"{path}: shape {got.shape} != {expected.shape}"
    assert dtype_signature(got.dtype) == dtype_signature(expected.dtype), (
        f"{path}: dtype {got.dtype} != {expected.dtype}"
    )
    assert getattr(got, "maxprint", None) == getattr(expected, "maxprint", None), f"{path}: maxprint"
    if expected.format == "lil":
        assert got.rows.tolist() == expected.rows.tolist(), f"{path}: rows differ"
        assert_same(expected.data.tolist(), got.data.tolist(), path=f"{path}.data")
        return
    if expected.format == "dok":
        assert dict(got.items()) == dict(expected.items()), f"{path}: items differ"
        return
    for name in _SPARSE_ARRAYS:
        if isinstance(getattr(expected, name, None), np.ndarray):
            _array_same(
                np.ascontiguousarray(getattr(expected, name)),
                np.ascontiguousarray(getattr(got, name)),
                f"{path}.{name}",
            )
    if expected.format == "coo":
        assert len(got.coords) == len(expected.coords), f"{path}: coords"
        for axis, (e, g) in enumerate(zip(expected.coords, got.coords)):
            _array_same(np.ascontiguousarray(e), np.ascontiguousarray(g), f"{path}.coords[{axis}]")


def _accessor_state(obj: Any) -> dict[str, Any]:
    """What cached accessors hold besides their object (an accessor holding nothing else is
    the one xarray makes again on first use)."""
    out = {}
    for name, acc in (getattr(obj, "_cache", None) or {}).items():
        state = {k: v for k, v in vars(acc).items() if v is not obj}
        if state:
            out[name] = (type(acc), state)
    return out


def assert_same(expected: Any, got: Any, path: str = "obj", original: Any = None) -> None:
    """``got`` (freight's result) is ``expected`` (pickle's result): same types, dtypes,
    values (bit for bit), array flags; masks, fill values and mask flags of masked arrays; Arrow
    types (extension classes included) and values; sparse formats and index arrays; xarray
    objects identical, their accessors' state included."""
    if isinstance(expected, np.ma.MaskedArray):
        _masked_same(expected, got, original, path)
    elif isinstance(expected, np.ndarray):
        _array_same(expected, got, path, original)
    elif isinstance(expected, np.generic):
        assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
        _array_same(np.asarray(expected), np.asarray(got), path, np.asarray(original) if original is not None else None)
    elif isinstance(expected, (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch, pa.Schema)):
        _arrow_same(expected, got, path)
    elif sp.issparse(expected):
        _sparse_same(expected, got, path)
    elif isinstance(expected, (xr.Dataset, xr.DataArray)):
        assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
        xr.testing.assert_identical(got, expected)
        assert _accessor_state(got) == _accessor_state(expected), f"{path}: accessor state differs"
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), f"{path}: {type(got)} of {len(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_same(e, g, f"{path}[{i}]", original[i] if isinstance(original, (list, tuple)) else None)
    elif isinstance(expected, float):
        assert type(got) is float and struct.pack("<d", got) == struct.pack("<d", expected), f"{path}: {got!r}"
    else:
        assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
        assert got == expected, f"{path}: {got!r} != {expected!r}"
