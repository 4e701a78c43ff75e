"""Values freight used to bring back different from what pickle brings back, or could not bring
back at all (issue 20: never a different value, never a payload that cannot be read back). Each
test compares with pickle's round trip through ``support.fidelity.assert_like_pickle``."""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
import xarray as xr

import freight
from support.fidelity import assert_like_pickle, assert_same, pickle_roundtrip

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


def _needs_pickle(obj) -> bool:
    return freight.inspect(freight.dumps(obj))["needs_pickle"]


def _rational():
    for name in ("numpy._core._rational_tests", "numpy.core._rational_tests"):
        try:
            return importlib.import_module(name).rational
        except ImportError:
            continue
    pytest.skip("this numpy has no _rational_tests module")


# --------------------------------------------------------------------------------------------
# numpy dtypes
# --------------------------------------------------------------------------------------------


def test_arrays_of_a_user_defined_dtype_go_to_pickle_and_keep_it():
    rational = _rational()
    a = np.array([rational(1, 2), rational(3, 4)])
    structured = np.zeros(2, dtype=[("r", rational), ("x", "i4")])
    for obj in (a, structured, [a, np.arange(3)]):
        assert_like_pickle(obj)
    back = freight.loads(freight.dumps(a))
    assert back.dtype == a.dtype and back[0] == rational(1, 2)  # before: raw '<V8' bytes
    assert _needs_pickle(a)
    assert not _needs_pickle(np.arange(3))  # numpy's own kinds stay native


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.zeros(10, dtype=[("x", "S", 0)])["x"],
        lambda: np.ndarray((3,), "S0"),
        lambda: np.ndarray((2, 3), "U0", order="F"),
        lambda: np.zeros(3, "V0"),
        lambda: np.zeros((2, 2), dtype=[]),
        lambda: np.zeros(4, dtype=[("a", "S0"), ("b", "<i2")]),
    ],
    ids=["S0-field", "S0", "U0-fortran", "V0", "empty-struct", "struct-with-S0"],
)
def test_zero_itemsize_dtypes_load_back_exactly(make):
    arr = make()
    blob = freight.dumps(arr)
    assert_like_pickle(arr)  # a copying load: it raised DeserializationError
    for options in ({"zero_copy": True}, {}):
        for source in (blob, bytearray(blob)):
            back = freight.loads(source, **options)
            # zero_copy gave 'S1' / 'U1' arrays of uninitialised bytes
            assert back.dtype.itemsize == arr.dtype.itemsize and back.dtype == arr.dtype
            assert back.shape == arr.shape and back.tobytes() == arr.tobytes()
    assert not freight.inspect(blob)["needs_pickle"]


def test_dtype_metadata_is_kept_through_pickle():
    enum = np.dtype("i4", metadata={"enum": {"a": 1, "b": 2}})  # h5py's enum dtypes look like this
    back = assert_like_pickle(np.zeros(3, enum))  # before: the metadata was dropped
    assert back.dtype.metadata == {"enum": {"a": 1, "b": 2}}
    back = assert_like_pickle(np.zeros(2, dtype=[("x", enum), ("y", "f8")]))
    assert back.dtype.fields["x"][0].metadata == {"enum": {"a": 1, "b": 2}}


def test_aligned_and_unaligned_structs_of_equal_layout_keep_their_flag():
    # They compare and hash equal: a cache by equality gave the second the first's wire form.
    aligned = np.dtype([("a", "i4"), ("b", "i1")], align=True)
    unaligned = np.dtype({"names": ["a", "b"], "formats": ["i4", "i1"], "offsets": [0, 4], "itemsize": 8})
    for dtype in (aligned, unaligned, aligned):
        back = assert_like_pickle(np.zeros(2, dtype))
        assert back.dtype.isalignedstruct == dtype.isalignedstruct


# --------------------------------------------------------------------------------------------
# numpy masked arrays
# --------------------------------------------------------------------------------------------

STRUCT = [("a", "i8"), ("b", "f8")]


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.ma.array(np.array(["a", 1], dtype=object), mask=[0, 1], fill_value="c"),
        lambda: np.ma.array(np.matrix([[1, 2], [3, 4]]), mask=[[0, 1], [0, 0]]),
        lambda: np.ma.array(np.arange(5, dtype=np.int16), hard_mask=True),
        lambda: np.ma.array(np.arange(3, dtype=np.uint8), mask=[1, 0, 0]),
        lambda: np.ma.array(np.zeros(3, dtype=STRUCT), mask=[(True, False), (False, False), (False, True)]),
        lambda: np.ma.array(np.zeros(2, dtype=[("p", STRUCT), ("q", "i2", (2,))]), mask=[((1, 0), (0, 1))] * 2),
        lambda: np.ma.array(np.zeros(3, dtype=STRUCT), fill_value=(5, 2.5)),
        lambda: np.ma.array(np.array(["2020-01-01", "NaT"], "M8[ns]"), mask=[0, 1]),
        lambda: np.ma.array(np.array([b"ab", b"c"]), mask=[1, 0], fill_value=b"zz"),
        lambda: np.ma.array(np.asfortranarray(np.arange(6.0).reshape(2, 3)), mask=np.eye(2, 3, dtype=bool)),
        lambda: np.ma.array(5.0, mask=True),
        lambda: np.ma.array([1.0, 2.0]),
    ],
    ids=[
        "object-fill", "matrix", "int16-hard", "uint8", "structured", "nested-structured",
        "structured-fill", "datetime", "bytes-fill", "fortran", "0-d", "nomask",
    ],
)  # fmt: skip
def test_masked_arrays_come_back_as_pickle_brings_them_back(make):
    m = make()
    _ = m.fill_value  # numpy stores the default once it is read: both states must travel
    assert_like_pickle(make())
    assert_like_pickle(m)


def test_a_fill_value_numpy_cannot_set_back_still_loads():
    # numpy stores the text '?' as the default fill of a generic datetime64 array, then refuses
    # to set it back: pickle's load (and copy.deepcopy) raise; freight's used to as well.
    m = np.ma.array(np.array(["2020-01-01", "NaT"], "M8[5s]"), mask=[0, 1])
    _ = m.fill_value
    with pytest.raises(TypeError):
        pickle_roundtrip(m)
    back = freight.loads(freight.dumps(m), allow_pickle=False)
    assert back.dtype == m.dtype and back.data.tobytes() == m.data.tobytes() and back.mask.tolist() == [False, True]
    assert back._fill_value == m._fill_value


def test_masked_arrays_of_numpy_kinds_still_load_without_pickle():
    for m in (
        np.ma.array(np.arange(5, dtype=np.int16), hard_mask=True),
        np.ma.array(np.zeros(3, dtype=STRUCT), mask=[(True, False), (False, False), (False, True)]),
    ):
        back = freight.loads(freight.dumps(m), allow_pickle=False)
        assert_same(pickle_roundtrip(m), back, original=m)


def test_a_masked_matrix_keeps_its_hard_mask_through_pickle():
    m = np.ma.array(np.matrix([[1, 2]]), mask=[[0, 1]], hard_mask=True)
    back = freight.loads(freight.dumps(m))
    assert type(back.data) is np.matrix and back.hardmask


class _Box:
    pass


def _forged(meta):
    """A payload holding a masked-array node with ``meta``, as another writer could make it."""
    forger = freight.Freight()

    class Writer:
        safe = True
        tag = "numpy.ma.MaskedArray"
        types = (_Box,)

        def serialize(self, box):
            return meta, []

        def deserialize(self, meta, frames):
            raise AssertionError

    forger.register(Writer(), replace=True)
    return forger.dumps(_Box())


def test_earlier_masked_payloads_with_a_fill_that_no_longer_fits_load_with_the_default():
    # What freight wrote before for int16 arrays: the default 999999 as a Python int.
    blob = _forged({"data": np.arange(3, dtype=np.int16), "mask": np.zeros(3, bool), "fill": 999999, "hard": True})
    back = freight.loads(blob, allow_pickle=False)
    assert back.hardmask and back.dtype == np.int16
    assert_same(pickle_roundtrip(np.ma.array(np.arange(3, dtype=np.int16))).fill_value, back.fill_value)


def test_a_mask_of_the_wrong_dtype_is_refused():
    blob = _forged(
        {"data": np.zeros(2, STRUCT), "mask": np.zeros(2, bool), "fill": None, "fill_scalar": False, "hard": False}
    )
    with pytest.raises(freight.DeserializationError, match="mask of dtype bool"):
        freight.loads(blob, allow_pickle=False)


@pytest.mark.parametrize(
    ("fill", "scalar", "match"),
    [
        (np.zeros(2), False, "not a 0-d array"),
        (np.array([("x", 1.5)], dtype=[("a", "U1"), ("b", "f8")])[0:1].reshape(()), False, "numpy refuses"),
        (np.frombuffer(b"\xff\xff\xff\xff", "<U1").reshape(()), True, "corrupt fill value"),
    ],
)
def test_a_forged_fill_value_is_refused(fill, scalar, match):
    blob = _forged(
        {"data": np.arange(2), "mask": np.zeros(2, bool), "fill": fill, "fill_scalar": scalar, "hard": False}
    )
    with pytest.raises(freight.DeserializationError, match=match):
        freight.loads(blob, allow_pickle=False)


# --------------------------------------------------------------------------------------------
# pyarrow extension types
# --------------------------------------------------------------------------------------------


class PointType(pa.ExtensionType):
    """Written in Python and never registered: its schema bytes come back as the storage."""

    def __init__(self, unit: str = "m"):
        self.unit = unit
        super().__init__(pa.struct([("x", pa.float64()), ("y", pa.float64())]), "freight.test.point")

    def __arrow_ext_serialize__(self) -> bytes:
        return self.unit.encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls(serialized.decode())


class LabelType(pa.ExtensionType):
    """Written in Python and registered by the fixture below."""

    def __init__(self):
        super().__init__(pa.string(), "freight.test.label")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


class ImpostorType(LabelType):
    """Another class under the registered name: the schema bytes would name LabelType."""


@pytest.fixture
def label_registered():
    pa.register_extension_type(LabelType())
    try:
        yield
    finally:
        pa.unregister_extension_type("freight.test.label")


def _points(unit: str = "m") -> pa.ExtensionArray:
    storage = pa.array([{"x": 1.0, "y": 2.0}, None, {"x": -0.0, "y": float("nan")}], PointType(unit).storage_type)
    return pa.ExtensionArray.from_storage(PointType(unit), storage)


def _holders(arr: pa.Array) -> list:
    """``arr`` as freight meets it: alone, chunked, a column, a struct field, a list's items."""
    return [
        arr,
        arr.slice(1),
        pa.chunked_array([arr, arr.slice(1)]),
        pa.table({"p": arr, "n": pa.array(range(len(arr)))}),
        pa.record_batch({"p": arr}),
        pa.StructArray.from_arrays([arr], names=["inner"]),
        pa.ListArray.from_arrays(pa.array([0, 1, len(arr)], pa.int32()), arr),
        pa.schema([pa.field("p", arr.type)]),
    ]


def test_unregistered_python_extension_types_come_back_as_themselves():
    for obj in _holders(_points("km")):
        back = assert_like_pickle(obj)  # before: the storage array (a StructArray)
        assert _needs_pickle(obj)
    assert type(back.field("p").type) is PointType and back.field("p").type.unit == "km"


def test_registered_and_arrow_extension_types_keep_the_native_path(label_registered):
    labels = pa.ExtensionArray.from_storage(LabelType(), pa.array(["a", None, "c"]))
    uuids = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([b"0123456789abcdef", None], pa.binary(16)))
    for arr in (labels, uuids):
        for obj in _holders(arr):
            back = freight.loads(freight.dumps(obj), allow_pickle=False)
            assert_same(pickle_roundtrip(obj), back)


def test_an_unregistered_class_under_a_registered_name_keeps_its_class(label_registered):
    arr = pa.ExtensionArray.from_storage(ImpostorType(), pa.array(["x"]))
    back = assert_like_pickle(arr)
    assert type(back.type) is ImpostorType


def test_empty_record_batches_load_back():
    # pyarrow's stream of a batch of no rows holds no array: loads found none to import.
    for batch in (
        pa.record_batch({"x": pa.array([], pa.int8())}),
        pa.record_batch({"x": [1], "p": _points()[:1]}).slice(1).replace_schema_metadata({"k": "v"}),
        pa.RecordBatch.from_pydict({}),
    ):
        assert_like_pickle(batch)


def test_an_empty_slice_of_fixed_width_values_can_be_concatenated():
    arr = pa.array([1, 2], pa.int64())
    back = freight.loads(freight.dumps(pa.chunked_array([arr, arr.slice(2)])))
    assert back.combine_chunks().to_pylist() == [1, 2]  # ArrowIndexError: buffer slice would exceed ...


def test_a_payload_claiming_an_arrow_object_of_another_type_is_refused():
    forger = freight.Freight()

    class Writer:
        safe = True
        tag = "pyarrow.Table"
        types = (_Box,)

        def serialize(self, box):
            from freight.serializers import Pickled

            return Pickled(pa.array([1])), []

        def deserialize(self, meta, frames):
            raise AssertionError

    forger.register(Writer(), replace=True)
    with pytest.raises(freight.DeserializationError, match="Array where a Table belongs"):
        freight.loads(forger.dumps(_Box()))


# --------------------------------------------------------------------------------------------
# xarray accessors
# --------------------------------------------------------------------------------------------


@xr.register_dataset_accessor("fidelity_test")
@xr.register_dataarray_accessor("fidelity_test")
class _Accessor:
    def __init__(self, obj):
        self._obj = obj


def test_state_kept_on_an_xarray_accessor_survives():
    ds = xr.Dataset({"a": ("x", np.arange(3))}, attrs={"k": "v"})
    ds.fidelity_test.value = "foo"
    da = xr.DataArray(np.arange(3.0), dims="x", name="d")
    da.fidelity_test.value = {"n": 1}
    for obj in (ds, da):
        back = assert_like_pickle(obj)  # before: the accessor came back without "value"
        assert back.fidelity_test.value == obj.fidelity_test.value
        assert back.fidelity_test._obj is back


def test_xarray_objects_without_accessor_state_stay_without_pickle():
    ds = xr.Dataset({"a": ("x", np.arange(3))})
    assert not _needs_pickle(ds)
    _ = ds.fidelity_test  # an accessor that only refers to its object: nothing to keep
    assert not _needs_pickle(ds)
    assert_like_pickle(ds)


# --------------------------------------------------------------------------------------------
# scipy.sparse
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: sp.coo_array(np.array([1, 0, 3])),
        lambda: sp.coo_array(np.arange(8).reshape(2, 2, 2)),
        lambda: sp.csr_array(np.array([0, 2.5, 0, 1])),
        lambda: sp.csr_matrix(np.eye(3), maxprint=7),
    ],
    ids=["coo-1d", "coo-3d", "csr-1d", "maxprint"],
)
def test_sparse_arrays_of_other_dimensions_and_settings_load_back(make):
    m = make()
    assert_like_pickle(m)  # before: dumps worked, loads refused the shape (or dropped maxprint)
    freight.loads(freight.dumps(m), allow_pickle=False)


def test_sparse_shapes_a_kind_cannot_have_are_refused():
    blob = _forged_sparse(
        {
            "kind": "csr_matrix",
            "shape": (3,),
            "data": np.ones(1),
            "indices": np.zeros(1, np.int32),
            "indptr": np.array([0, 1], np.int32),
        }
    )
    with pytest.raises(freight.DeserializationError, match="shape"):
        freight.loads(blob, allow_pickle=False)


def _forged_sparse(meta):
    forger = freight.Freight()

    class Writer:
        safe = True
        tag = "scipy.sparse"
        types = (_Box,)

        def serialize(self, box):
            return meta, []

        def deserialize(self, meta, frames):
            raise AssertionError

    forger.register(Writer(), replace=True)
    return forger.dumps(_Box())
