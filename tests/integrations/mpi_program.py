"""Run by tests/integrations/test_mpi4py.py under ``mpiexec -n 2``: both ranks install freight,
exchange numpy arrays, DataFrames and closures with the lowercase methods (in band, then through
``wrap``'s out-of-band frames), and rank 0 prints what it checked as one JSON line."""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
from mpi4py import MPI

import freight
import freight.integrations.mpi4py as fm

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
report: dict = {"size": comm.Get_size()}

if mode == "refuse":
    # rank 1 sends a payload that needs pickle; rank 0 refuses it (allow_pickle=False)
    fm.install(allow_pickle=rank != 0)
    if rank == 1:
        comm.send({"f": len}, dest=0)
        comm.send(object(), dest=0)
    else:
        try:
            comm.recv(source=1)
            report["refused"] = None
        except freight.FreightError:
            pass
        try:
            comm.recv(source=1)
            report["refused"] = None
        except freight.UnsafePayloadError as e:
            report["refused"] = type(e).__name__
    if rank == 0:
        print(json.dumps(report), flush=True)
    sys.exit(0)

if mode == "wrap":
    # wrap(comm): small values in one message (a plain recv reads them), large ones as two (the
    # frame table with the header, then the frames: a plain recv refuses them, naming wrap); isend,
    # ssend and sendrecv; a value of several large frames; mprobe refused
    fm.install()
    w = fm.wrap(comm)
    big = np.arange(fm.INLINE_LIMIT // 8 + 1, dtype=np.float64)  # just above INLINE_LIMIT: out of band
    small = {"n": 3, "a": np.arange(10)}
    if rank == 1:
        w.send(small, dest=0, tag=1)
        w.send(big, dest=0, tag=2)
        w.isend(big, dest=0, tag=3).wait()
        w.ssend(small, dest=0, tag=4)
        got = w.sendrecv(big * 2, dest=0, sendtag=5, source=0, recvtag=6)
        w.send(bool(np.array_equal(got, big * 3)), dest=0, tag=7)
        w.send({"a": big, "df": pd.DataFrame({"x": big, "s": ["v"] * len(big)}), "b": big[::2].copy()}, dest=0, tag=8)
        w.send(big + 9, dest=0, tag=9)
        w.send(big + 10, dest=0, tag=10)
        # scalars and short tuples of them: mpi4py's own send (one freight payload, in C)
        w.send(7, dest=0, tag=11)
        w.send(("inc", 5, 2.5, None), dest=0, tag=12)
        w.send(("x" * 5000, 1), dest=0, tag=13)  # a long string: the path that looks for frames
    else:
        got = comm.recv(source=1, tag=1)  # the plain communicator: one message
        report["small_one_message"] = got["n"] == 3 and np.array_equal(got["a"], np.arange(10))
        try:
            comm.recv(source=1, tag=2)
            report["plain_recv_of_frames"] = None
        except freight.DeserializationError as e:
            report["plain_recv_of_frames"] = "wrap(comm)" in str(e)
            status = MPI.Status()
            comm.Probe(source=1, tag=2, status=status)  # drain what followed: the frames, in one message
            comm.Recv(bytearray(status.Get_count(MPI.BYTE)), source=1, tag=2)
        got = w.recv(source=1, tag=3)
        report["isend_large"] = bool(np.array_equal(got, big) and got.flags.writeable)
        report["ssend_small"] = w.recv(source=1, tag=4)["n"] == 3
        got = w.sendrecv(big * 3, dest=1, sendtag=6, source=1, recvtag=5)
        report["sendrecv"] = bool(np.array_equal(got, big * 2)) and w.recv(source=1, tag=7)
        got = w.recv(source=1, tag=8)
        report["several_frames"] = bool(
            np.array_equal(got["a"], big) and np.array_equal(got["b"], big[::2])
            and got["df"].equals(pd.DataFrame({"x": big, "s": ["v"] * len(big)})) and got["a"].flags.writeable
        )  # fmt: skip
        # a receive naming no source or tag: the frames are taken from where the first message
        # came from (the communicator's own status, or the caller's, which keeps saying so)
        got = w.recv()
        status = MPI.Status()
        got2 = w.recv(status=status)
        report["any_source_large"] = bool(
            np.array_equal(got, big + 9) and np.array_equal(got2, big + 10)
            and status.Get_source() == 1 and status.Get_tag() == 10
        )  # fmt: skip
        report["scalars_one_message"] = (
            comm.recv(source=1, tag=11) == 7 and w.recv(source=1, tag=12) == ("inc", 5, 2.5, None)
            and w.recv(source=1, tag=13) == ("x" * 5000, 1)
        )  # fmt: skip
        try:
            w.mprobe(source=1)
            report["mprobe"] = None
        except freight.FreightError as e:
            report["mprobe"] = "use recv" in str(e)
        print(json.dumps(report), flush=True)
    sys.exit(0)

fm.install()
arr = np.arange(1_000_000, dtype=np.float64).reshape(1000, 1000)
df = pd.DataFrame({"i": np.arange(10_000), "s": [f"r{i % 13}" for i in range(10_000)]})
weights = np.arange(4.0)


def dot(x):  # a closure carrying an array
    return float(weights @ x)


for name, c in (("inband", comm), ("oob", fm.wrap(comm))):
    # point to point
    if rank == 1:
        c.send((arr, df, dot), dest=0, tag=7)
    else:
        a, d, f = c.recv(source=1, tag=7)
        report[f"{name}_send"] = bool(np.array_equal(a, arr) and d.equals(df) and f(np.ones(4)) == 6.0)
        report[f"{name}_writeable"] = bool(a.flags.writeable)
    # collectives
    got = c.bcast(df if rank == 0 else None, root=0)
    part = c.scatter([arr[:500], arr[500:]] if rank == 0 else None, root=0)
    parts = c.gather(part * 2, root=0)
    if rank == 0:
        report[f"{name}_bcast"] = bool(got.equals(df))
        report[f"{name}_scatter_gather"] = bool(np.array_equal(np.concatenate(parts), arr * 2))
    sums = c.allgather(float(part.sum()))
    report[f"{name}_allgather"] = bool(abs(sum(sums) - float(arr.sum())) < 1e-3)

# every size class of the in-band receive (a bytes copy, copy=True, a bytearray the arrays view),
# each checked after the next message reused mpi4py's receive buffer
sizes = (100, 1_000_000, 3_000_000)  # 800 B, 8 MB, 24 MB
if rank == 1:
    for n in sizes:
        comm.send(np.arange(n, dtype=np.float64), dest=0, tag=8)
else:
    got = [comm.recv(source=1, tag=8) for n in sizes]
    report["inband_sizes"] = all(
        np.array_equal(g, np.arange(n, dtype=np.float64)) and g.flags.writeable for g, n in zip(got, sizes)
    )

# what the in-band path puts on the wire is a freight payload
if rank == 1:
    comm.send(arr.ravel()[:3], dest=0, tag=9)
else:
    status = MPI.Status()
    comm.Probe(source=1, tag=9, status=status)
    raw = bytearray(status.Get_count(MPI.BYTE))
    comm.Recv([raw, MPI.BYTE], source=1, tag=9)
    report["wire_is_freight"] = freight.loads(bytes(raw)).tolist() == [0.0, 1.0, 2.0]

if rank == 0:
    print(json.dumps(report), flush=True)
