"""Who ``freight bench`` measures: freight's paths and the peers a user would otherwise use.

A peer is a pair of functions, ``dumps(obj) -> payload`` and ``loads(payload) -> obj``, and the
workload kinds it applies to. A peer whose library is not installed is skipped, and the report
says so; one that fails on a workload (pyfory on an unsupported type, say) is reported with
its error instead of being left out quietly.

Every peer is called the way its documentation shows for going to bytes and back in memory:
``io.BytesIO`` where the API writes to a file, defaults otherwise. ``freight`` is ``dumps`` /
``loads`` with freight's defaults; ``freight (checksum)`` writes (and so verifies) frame
checksums, for the array workloads, so that the report shows what integrity costs;
``freight frames`` is ``dumps_frames`` and ``loads_frames(zero_copy=True)``, the path engines
use. The ``copy`` peer is ``arr.copy()`` in both directions: one copy of the data, the floor for
anything that returns new bytes.

``zero_copy`` says in which directions a peer does *not* copy the data (out-of-band buffers
that view the array, arrays that view the payload): the report only holds a freight row against
peers that copy where it copies and do not where it does not (see ratios.py), since a
view costs nothing at any size and a ratio against one says nothing.
"""

from __future__ import annotations

import importlib.util
import io
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from freight.bench.harness import ncpu

Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


@dataclass(frozen=True)
class Call:
    """``fn(value, *args)``: a peer's call that takes options after the value, timed as
    ``partial(fn, value, *args)`` (:func:`bound`). A ``partial`` that holds keywords costs each
    call a dict and the keyword path: ``pickle.dumps(12345, protocol=5)`` took 186 ns called
    directly, 300 ns through ``partial(pickle.dumps, protocol=5)``, which made pickle look slower
    than it is on small values. Positional options are called the way a user's code calls."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def __call__(self, value: Any) -> Any:
        return self.fn(value, *self.args)


def bound(fn: Callable[[Any], Any], value: Any) -> Callable[[], Any]:
    """The zero-argument call the harness times: ``fn(value)``, with no wrapper of ours around
    the library's own callable."""
    if isinstance(fn, Call):
        return partial(fn.fn, value, *fn.args)
    return partial(fn, value)


@dataclass(frozen=True)
class Peer:
    """``make()`` imports the peer's library and returns its ``(dumps, loads)``: the library's own
    callables where possible, so that no wrapper of ours is timed on microsecond calls."""

    name: str
    kinds: frozenset[str]
    make: Callable[[], Codec]
    requires: tuple[str, ...] = ()
    #: freight's own rows (drawn thicker, left out of "best peer")
    ours: bool = False
    #: a reference, not a serializer (``copy``): shown, never the "best peer"
    reference: bool = False
    #: the directions ("dumps", "loads") in which the data is not copied but viewed
    zero_copy: frozenset[str] = frozenset()

    @property
    def codec(self) -> Codec:
        return _codec(self.make)

    def missing(self) -> list[str]:
        return missing(self.requires)


def missing(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found without importing them)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


@cache
def _codec(make: Callable[[], Codec]) -> Codec:
    return make()


def payload_size(payload: Any) -> int:
    """Bytes of a payload: one buffer, or a header plus out-of-band buffers / frames."""
    if isinstance(payload, (list, tuple)):
        return sum(payload_size(p) for p in payload)
    if hasattr(payload, "nbytes"):
        return int(payload.nbytes)
    return len(payload)


# -- freight ---------------------------------------------------------------------------------------


def _freight() -> Codec:
    import freight

    return freight.dumps, freight.loads


def _freight_frames() -> Codec:
    import freight

    return freight.dumps_frames, partial(freight.loads_frames, zero_copy=True)


def _freight_checksum() -> Codec:
    import freight

    # loads verifies the checksums a payload carries: no option needed on that side
    return partial(freight.dumps, checksum=True), freight.loads


def _freight_compressed(codec: Any) -> Callable[[], Codec]:
    def make() -> Codec:
        import freight

        return partial(freight.dumps, compression=codec), freight.loads

    return make


# -- pickle family -----------------------------------------------------------------------------------


def _pickle() -> Codec:
    return Call(pickle.dumps, (5,)), pickle.loads


def _pickle_oob_dumps(x: Any) -> tuple[bytes, list[Any]]:
    buffers: list[Any] = []
    head = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    return head, [b.raw() for b in buffers]


def _pickle_oob_loads(parts: tuple[bytes, list[Any]]) -> Any:
    return pickle.loads(parts[0], buffers=parts[1])


def _pickle_oob() -> Codec:
    return _pickle_oob_dumps, _pickle_oob_loads


def _cloudpickle() -> Codec:
    import cloudpickle

    return Call(cloudpickle.dumps, (5,)), pickle.loads


def _dill() -> Codec:
    import dill

    return partial(dill.dumps, recurse=True), dill.loads


# -- engines' own serializers ------------------------------------------------------------------------


def _proxystore() -> Codec:
    from proxystore.serialize import deserialize, serialize

    return serialize, deserialize


def _dask() -> Codec:
    from distributed.protocol import deserialize_bytes, serialize_bytes

    return serialize_bytes, deserialize_bytes


def _fory() -> Codec:
    import pyfory

    # Python-native mode (xlang=False) with pickle-like fallbacks for types it has no serializer
    # for (strict=False), reference tracking off: its fastest configuration for these values.
    fory = pyfory.Fory(xlang=False, ref=False, strict=False)
    return fory.serialize, fory.deserialize


def _msgspec() -> Codec:
    import msgspec

    # msgpack has no tuple: a 3-tuple comes back as a list (the builtins workloads accept that)
    return msgspec.msgpack.Encoder().encode, msgspec.msgpack.Decoder().decode


# -- numpy and the data libraries' own formats --------------------------------------------------------


def _copy() -> Codec:
    import numpy as np

    return np.ndarray.copy, np.ndarray.copy


def _np_save(x: Any) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, x, allow_pickle=False)
    return buf.getvalue()


def _np_load(b: bytes) -> Any:
    import numpy as np

    return np.load(io.BytesIO(b), allow_pickle=False)


def _to_parquet(df: Any) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf)
    return buf.getvalue()


def _read_parquet(b: bytes) -> Any:
    import pandas as pd

    return pd.read_parquet(io.BytesIO(b))


def _to_feather(df: Any) -> bytes:
    buf = io.BytesIO()
    df.to_feather(buf)
    return buf.getvalue()


def _read_feather(b: bytes) -> Any:
    import pandas as pd

    return pd.read_feather(io.BytesIO(b))


def _pl_write_ipc(df: Any) -> bytes:
    buf = io.BytesIO()
    df.write_ipc(buf)
    return buf.getvalue()


def _pl_read_ipc(b: bytes) -> Any:
    import polars as pl

    return pl.read_ipc(io.BytesIO(b))


def _pl_write_parquet(df: Any) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


def _pl_read_parquet(b: bytes) -> Any:
    import polars as pl

    return pl.read_parquet(io.BytesIO(b))


def _arrow_ipc_write(t: Any) -> Any:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as writer:
        writer.write_table(t)
    return sink.getvalue()


def _arrow_ipc_read(b: Any) -> Any:
    import pyarrow as pa

    return pa.ipc.open_stream(b).read_all()


def _arrow_ipc_read_validated(b: Any) -> Any:
    """The IPC read, then the checks freight makes on untrusted bytes (offsets, UTF-8): the safe
    way to read an IPC stream from elsewhere."""
    t = _arrow_ipc_read(b)
    t.validate(full=True)
    return t


@dataclass(frozen=True)
class _LocatedStream:
    """An IPC stream, with where its string columns' buffers lie in it: found once, when it is
    written, as a native reader finds them from the stream's metadata at no measurable cost."""

    stream: Any
    strings: list[tuple[Any, ...]]

    @property
    def nbytes(self) -> int:
        return int(self.stream.size)


def _arrow_ipc_write_checked(t: Any) -> _LocatedStream:
    import pyarrow as pa

    stream = _arrow_ipc_write(t)
    strings = []
    for column in _arrow_ipc_read(stream).columns:
        if (
            not pa.types.is_primitive(column.type)
            and not pa.types.is_string(column.type)
            and not pa.types.is_large_string(column.type)
        ):
            # Views, lists, structs, dictionaries need checks this floor does not make: it would
            # read too low, so it is not measured for them.
            raise NotImplementedError(f"the checked floor covers numeric and string columns, not {column.type}")
        wide = pa.types.is_large_string(column.type)
        if wide or pa.types.is_string(column.type):
            strings += [(c.buffers()[1], c.buffers()[2], wide, c.offset, len(c)) for c in column.chunks if len(c)]
    return _LocatedStream(stream, strings)


def _arrow_ipc_checked() -> Codec:
    """The IPC read, then only the checks untrusted bytes need for memory safety and that the
    read skips, as fast as freight makes them: one pass over each string column's offsets and
    text (in bounds, in order, UTF-8; freight-core's own check). What a reader that keeps those
    checks cannot go below: the floor of ``freight.bench.causes``."""
    from freight._freight import string_array_valid

    def read(payload: _LocatedStream) -> Any:
        t = _arrow_ipc_read(payload.stream)
        for args in payload.strings:
            if not string_array_valid(*args):
                raise ValueError("invalid string column")
        return t

    return _arrow_ipc_write_checked, read


def _torch_save(x: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(x, buf)
    return buf.getvalue()


def _torch_load(b: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(b), weights_only=True)


def _safetensors_save(x: Any) -> bytes:
    from safetensors.torch import save

    return save(x if isinstance(x, dict) else {"t": x})


def _safetensors_load(b: bytes) -> Any:
    from safetensors.torch import load

    out = load(b)
    return out if set(out) != {"t"} else out["t"]


# -- compressors --------------------------------------------------------------------------------------
# Compressors give bytes back; the array is rebuilt over them (np.frombuffer, no copy) so that the
# round trip is checked like every other. The workload's dtype is int64.


def _as_int64(b: Any) -> Any:
    import numpy as np

    return np.frombuffer(b, dtype="int64")


def _lz4_dumps(x: Any) -> bytes:
    import lz4.frame

    return lz4.frame.compress(x)


def _lz4_loads(b: bytes) -> Any:
    import lz4.frame

    return _as_int64(lz4.frame.decompress(b))


def _zstd_dumps(x: Any) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=3).compress(x)


def _zstd_loads(b: bytes) -> Any:
    import zstandard

    return _as_int64(zstandard.ZstdDecompressor().decompress(b))


def _blosc2_dumps(codec: str, level: int) -> Callable[[Any], bytes]:
    def dumps(x: Any) -> bytes:
        import blosc2

        cparams = blosc2.CParams(codec=getattr(blosc2.Codec, codec), clevel=level, typesize=x.itemsize, nthreads=ncpu())
        return blosc2.compress2(x, cparams=cparams)

    return dumps


def _blosc2_loads(b: bytes) -> Any:
    import blosc2

    return _as_int64(blosc2.decompress2(b, dparams=blosc2.DParams(nthreads=ncpu())))


# -- the table ----------------------------------------------------------------------------------------

_DATA = {"array", "pandas", "polars", "arrow", "torch", "torch-dict", "builtins", "closure"}
_VIEWS = frozenset({"dumps", "loads"})


def _k(*kinds: str) -> frozenset[str]:
    return frozenset(kinds)


def _pair(dumps: Callable[[Any], Any], loads: Callable[[Any], Any]) -> Callable[[], Codec]:
    """A factory for a peer whose (module-level) functions are ready as they are."""
    return lambda: (dumps, loads)


PEERS: tuple[Peer, ...] = (
    Peer("freight", frozenset(_DATA | {"compress"}), _freight, ours=True),
    Peer("freight (checksum)", _k("array"), _freight_checksum, ours=True),
    Peer("freight frames", frozenset(_DATA - {"builtins", "closure"}), _freight_frames, ours=True, zero_copy=_VIEWS),
    Peer("freight lz4", _k("compress"), _freight_compressed("lz4"), ours=True),
    Peer("freight zstd-3", _k("compress"), _freight_compressed(("zstd", 3)), ours=True),
    Peer("copy", _k("array"), _copy, reference=True),
    Peer("pickle-5", frozenset(_DATA - {"closure"}), _pickle),
    Peer("pickle-5 oob", _k("array", "pandas", "torch", "torch-dict"), _pickle_oob, zero_copy=_VIEWS),
    Peer("cloudpickle", _k("array", "builtins", "closure"), _cloudpickle, ("cloudpickle",)),
    Peer("dill", _k("closure"), _dill, ("dill",)),
    Peer("numpy.save", _k("array"), _pair(_np_save, _np_load), ("numpy",)),
    Peer("proxystore", _k("array", "pandas"), _proxystore, ("proxystore",)),
    Peer("dask", _k("array", "pandas"), _dask, ("distributed",)),
    Peer("pyfory", _k("array", "pandas", "builtins"), _fory, ("pyfory",)),
    Peer("msgspec", _k("builtins"), _msgspec, ("msgspec",)),
    Peer("parquet", _k("pandas"), _pair(_to_parquet, _read_parquet), ("pyarrow",)),
    Peer("feather", _k("pandas"), _pair(_to_feather, _read_feather), ("pyarrow",)),
    Peer("polars ipc", _k("polars"), _pair(_pl_write_ipc, _pl_read_ipc)),
    Peer("polars parquet", _k("polars"), _pair(_pl_write_parquet, _pl_read_parquet)),
    # the stream is written as one copy, but read_all() returns arrays that view the payload
    Peer("arrow ipc", _k("arrow"), _pair(_arrow_ipc_write, _arrow_ipc_read), zero_copy=frozenset({"loads"})),
    Peer(
        "arrow ipc (validated)",
        _k("arrow"),
        _pair(_arrow_ipc_write, _arrow_ipc_read_validated),
        zero_copy=frozenset({"loads"}),
        reference=True,
    ),
    Peer(
        "arrow ipc (checked)",
        _k("arrow"),
        _arrow_ipc_checked,
        zero_copy=frozenset({"loads"}),
        reference=True,
    ),
    Peer("torch.save", _k("torch", "torch-dict"), _pair(_torch_save, _torch_load)),
    Peer("safetensors", _k("torch", "torch-dict"), _pair(_safetensors_save, _safetensors_load), ("safetensors",)),
    Peer("lz4.frame", _k("compress"), _pair(_lz4_dumps, _lz4_loads), ("lz4",)),
    Peer("zstandard-3", _k("compress"), _pair(_zstd_dumps, _zstd_loads), ("zstandard",)),
    Peer("blosc2 lz4", _k("compress"), _pair(_blosc2_dumps("LZ4", 5), _blosc2_loads), ("blosc2",)),
    Peer("blosc2 zstd-3", _k("compress"), _pair(_blosc2_dumps("ZSTD", 3), _blosc2_loads), ("blosc2",)),
)

#: the peer every ratio is taken against, besides the best one
BASELINE = "pickle-5"


def for_kind(kind: str, peers: Sequence[Peer] = PEERS) -> list[Peer]:
    return [p for p in peers if kind in p.kinds]


def peer_named(name: str) -> Peer:
    """The peer called ``name`` (how a child process is told which peer to run)."""
    for p in PEERS:
        if p.name == name:
            return p
    raise KeyError(f"no peer named {name!r}")


def freight_defaults() -> dict[str, bool]:
    """Whether ``freight.dumps`` writes checksums by default: what the ``freight`` row measures."""
    import inspect

    import freight

    return {"checksum": bool(inspect.signature(freight.Freight).parameters["checksum"].default)}


__all__ = ["BASELINE", "PEERS", "Peer", "for_kind", "freight_defaults", "missing", "payload_size", "peer_named"]
