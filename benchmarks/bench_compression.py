"""Compression benchmarks for freight, measured against python-lz4 and python-zstandard in one run.

Run from a source checkout (``make bench`` runs it after bench_core.py)::

    python benchmarks/bench_compression.py            # full run: 256 MiB arrays, ~1 minute
    python benchmarks/bench_compression.py --quick    # 32 MiB arrays, fewer repetitions
    python benchmarks/bench_compression.py --json results.json

Cases (see benchmarks/README.md):

1. ``compression="lz4"`` on compressible int64 data vs ``lz4.frame``; shuffle vs no shuffle.
2. ``compression=("zstd", 3)`` vs ``zstandard`` level 3 (single-threaded; ``threads=-1`` shown
   for information).
3. ``compression="auto"`` on incompressible float64 data vs ``compression=None``.
4. Checksum verification: ``loads(blob)`` vs ``loads(blob, verify=False)``.

Every time is a median of several single-call repetitions (one warm-up call first), timed with
``time.perf_counter_ns`` with the garbage collector off. The operations of one case are timed
interleaved (each repetition runs every operation once, in a rotating order), so slow drifts of
the machine hit all of them alike. Freeing a result is not timed. Throughput is
``raw bytes / (median compress time + median decompress time)``; size ratio is
``compressed / raw`` (smaller is better). freight compresses in parallel on all cores; the
peers run on one core unless stated otherwise.

This is not a pytest test; the exit status is 0 unless ``--strict`` is given and a target is
missed, or something fails to round-trip (2).
"""

from __future__ import annotations

import gc
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a benchmark requirement
    sys.exit("bench_compression.py needs numpy (pip install numpy)")

try:
    import lz4
    import lz4.frame
    import zstandard
except ImportError:  # pragma: no cover - benchmark-only peers
    sys.exit("bench_compression.py needs the peers lz4 and zstandard (pip install lz4 zstandard)")

import freight
from freight.bench.harness import (
    MiB,
    Target,
    Timing,
    finish,
    fmt_ns,
    fmt_rate,
    ncpu,
    parse_args,
    print_table,
    print_targets,
    time_interleaved,
)

# --------------------------------------------------------------------------------------------
# Configuration and timing
# --------------------------------------------------------------------------------------------


class Config:
    def __init__(self, quick: bool):
        self.quick = quick
        self.array_mib = 32 if quick else 256
        self.nbytes = self.array_mib * MiB
        self.repeat = 5 if quick else 7
        self.warmup = 1


# --------------------------------------------------------------------------------------------
# Results and reporting
# --------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    """One codec on one input: compress (or dumps) and decompress (or loads) times, sizes."""

    case: str
    name: str
    raw_bytes: int
    stored_bytes: int | None
    compress: Timing | None
    decompress: Timing | None
    threads: str = ""
    note: str = ""

    @property
    def total_ns(self) -> float | None:
        parts = [t.median_ns for t in (self.compress, self.decompress) if t is not None]
        return sum(parts) if parts else None

    @property
    def throughput(self) -> float | None:
        """Raw bytes per second through compress + decompress."""
        total = self.total_ns
        return self.raw_bytes / (total / 1e9) if total else None

    @property
    def size_ratio(self) -> float | None:
        return self.stored_bytes / self.raw_bytes if self.stored_bytes is not None else None

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(total_ns=self.total_ns, throughput_bytes_per_s=self.throughput, size_ratio=self.size_ratio)
        return d


class Report:
    def __init__(self) -> None:
        self.measurements: list[Measurement] = []
        self.targets: list[Target] = []
        self.info: dict[str, Any] = {}
        self.errors: list[str] = []

    def measure(self, m: Measurement) -> Measurement:
        self.measurements.append(m)
        return m

    def target(
        self, case: str, name: str, measured: str, required: str, passed: bool, value: float | None = None
    ) -> None:
        self.targets.append(Target(case, name, measured, required, bool(passed), value))

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.errors.append(what)
            print(f"  ERROR: {what}", file=sys.stderr)
        return ok

    def print_case(self, case: str, title: str, notes: list[str]) -> None:
        print()
        print(f"== {case}. {title} ==")
        rows = [m for m in self.measurements if m.case == case]
        if rows:
            headers = ["codec", "threads", "compress", "decompress", "total", "throughput", "size/raw"]
            table = [
                [
                    m.name,
                    m.threads,
                    fmt_ns(m.compress.median_ns if m.compress else None),
                    fmt_ns(m.decompress.median_ns if m.decompress else None),
                    fmt_ns(m.total_ns),
                    fmt_rate(m.throughput),
                    f"{m.size_ratio:.4f}" if m.size_ratio is not None else "-",
                ]
                for m in rows
            ]
            print_table(headers, table)
        print_targets([t for t in self.targets if t.case == case])
        for n in notes:
            print(f"  note: {n}")
        sys.stdout.flush()


def codec_targets(report: Report, case: str, codec: str, peer: str, fr: Measurement, pr: Measurement) -> None:
    """A codec's two targets against its peer: throughput >= 1.8x, and a result no larger."""
    speedup = fr.throughput / pr.throughput
    report.target(case, f"{codec} throughput: freight / {peer}", f"{speedup:.2f}x", ">= 1.80x", speedup >= 1.8, speedup)
    report.target(
        case,
        f"{codec} size: freight blob vs {peer}",
        f"{fr.size_ratio:.4f} vs {pr.size_ratio:.4f}",
        f"freight <= {peer}",
        fr.size_ratio <= pr.size_ratio,
        fr.size_ratio / pr.size_ratio,
    )


def _frame(blob: bytes) -> dict:
    frames = freight.inspect(blob)["frames"]
    if len(frames) != 1:
        raise AssertionError(f"expected one frame, inspect reports {len(frames)}")
    return frames[0]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def compressible_int64(nbytes: int) -> np.ndarray:
    """Random int64 in [0, 1000): 6 of 8 bytes are zero, the low two are noisy."""
    return np.random.default_rng(0).integers(0, 1000, size=nbytes // 8, dtype=np.int64)


def random_bits_float64(nbytes: int) -> np.ndarray:
    """Uniformly random 64-bit patterns viewed as float64: incompressible, with or without shuffle."""
    bits = np.random.default_rng(1).integers(
        0, np.iinfo(np.uint64).max, size=nbytes // 8, dtype=np.uint64, endpoint=True
    )
    return bits.view(np.float64)


def uniform_float64(nbytes: int) -> np.ndarray:
    """``rng.random()`` floats in [0, 1): random mantissas, but a narrow range of exponents."""
    return np.random.default_rng(2).random(nbytes // 8)


def _same_bits(a: np.ndarray, b: Any) -> bool:
    """Bit-exact equality (NaN-safe), also checking dtype and shape."""
    if not isinstance(b, np.ndarray) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


# --------------------------------------------------------------------------------------------
# 1. lz4
# --------------------------------------------------------------------------------------------


def case_lz4(report: Report, cfg: Config) -> list[str]:
    arr = compressible_int64(cfg.nbytes)
    raw = arr.tobytes()  # the peer's input, made outside the timing
    as_bytes = arr.view(np.uint8)  # item size 1: freight never shuffles it
    n = arr.nbytes

    blob = freight.dumps(arr, compression="lz4")
    blob_u8 = freight.dumps(as_bytes, compression="lz4")
    peer = lz4.frame.compress(raw)

    # Correctness, once, outside the timing.
    report.check(np.array_equal(freight.loads(blob), arr), "freight lz4 round trip differs (int64)")
    report.check(np.array_equal(freight.loads(blob_u8), as_bytes), "freight lz4 round trip differs (uint8 view)")
    report.check(lz4.frame.decompress(peer) == raw, "lz4.frame round trip differs")
    f, f_u8 = _frame(blob), _frame(blob_u8)
    report.check(f["codec"] == "lz4" and f_u8["codec"] == "lz4", f"unexpected codecs {f['codec']!r}, {f_u8['codec']!r}")
    report.check(f_u8["shuffle"] is None, f"uint8 frame reports shuffle={f_u8['shuffle']!r}")
    report.info["lz4_frame"] = f
    report.info["lz4_frame_no_shuffle"] = f_u8

    t = time_interleaved(
        {
            "f_dumps": lambda: freight.dumps(arr, compression="lz4"),
            "f_loads": lambda: freight.loads(blob),
            "u8_dumps": lambda: freight.dumps(as_bytes, compression="lz4"),
            "u8_loads": lambda: freight.loads(blob_u8),
            "p_comp": lambda: lz4.frame.compress(raw),
            "p_decomp": lambda: lz4.frame.decompress(peer),
        },
        cfg.repeat,
        cfg.warmup,
    )
    cores = ncpu()
    fr = report.measure(
        Measurement(
            "1", f"freight lz4 (shuffle={f['shuffle']})", n, len(blob), t["f_dumps"], t["f_loads"], f"all ({cores})"
        )
    )
    report.measure(
        Measurement(
            "1", "freight lz4, uint8 view (no shuffle)", n, len(blob_u8), t["u8_dumps"], t["u8_loads"], f"all ({cores})"
        )
    )
    pr = report.measure(
        Measurement("1", "python-lz4 lz4.frame (defaults)", n, len(peer), t["p_comp"], t["p_decomp"], "1")
    )

    codec_targets(report, "1", "lz4", "lz4.frame", fr, pr)
    report.target(
        "1",
        "lz4 shuffle: with vs without",
        f"{len(blob):,} vs {len(blob_u8):,} B",
        "with < without",
        len(blob) < len(blob_u8),
        len(blob) / len(blob_u8),
    )
    return [
        f"input: {cfg.array_mib} MiB of int64 from rng.integers(0, 1000); throughput = raw / (compress + decompress).",
        "freight times are dumps/loads of the array (frame checksums written and verified, the defaults); "
        "lz4.frame gets arr.tobytes() made outside the timing (level 0, no content checksum).",
        f"freight runs on all {cores} cores (1 MiB blocks, GIL released); python-lz4 on one.",
    ]


# --------------------------------------------------------------------------------------------
# 2. zstd level 3
# --------------------------------------------------------------------------------------------


def case_zstd(report: Report, cfg: Config) -> list[str]:
    arr = compressible_int64(cfg.nbytes)
    raw = arr.tobytes()
    n = arr.nbytes
    zc = zstandard.ZstdCompressor(level=3)
    zc_mt = zstandard.ZstdCompressor(level=3, threads=-1)
    zd = zstandard.ZstdDecompressor()

    blob = freight.dumps(arr, compression=("zstd", 3))
    peer = zc.compress(raw)
    peer_mt = zc_mt.compress(raw)

    report.check(np.array_equal(freight.loads(blob), arr), "freight zstd round trip differs")
    report.check(zd.decompress(peer) == raw, "zstandard round trip differs")
    report.check(zd.decompress(peer_mt) == raw, "zstandard (threads=-1) round trip differs")
    f = _frame(blob)
    report.check(f["codec"] == "zstd", f"unexpected codec {f['codec']!r}")
    report.info["zstd_frame"] = f

    t = time_interleaved(
        {
            "f_dumps": lambda: freight.dumps(arr, compression=("zstd", 3)),
            "f_loads": lambda: freight.loads(blob),
            "p_comp": lambda: zc.compress(raw),
            "p_decomp": lambda: zd.decompress(peer),
            "mt_comp": lambda: zc_mt.compress(raw),
            "mt_decomp": lambda: zd.decompress(peer_mt),
        },
        cfg.repeat,
        cfg.warmup,
    )
    cores = ncpu()
    fr = report.measure(
        Measurement(
            "2", f"freight zstd-3 (shuffle={f['shuffle']})", n, len(blob), t["f_dumps"], t["f_loads"], f"all ({cores})"
        )
    )
    pr = report.measure(Measurement("2", "zstandard level 3", n, len(peer), t["p_comp"], t["p_decomp"], "1"))
    report.measure(
        Measurement(
            "2",
            "zstandard level 3, threads=-1 (info)",
            n,
            len(peer_mt),
            t["mt_comp"],
            t["mt_decomp"],
            f"{cores} (compress)",
        )
    )

    codec_targets(report, "2", "zstd", "zstandard", fr, pr)
    return [
        f"input: the same {cfg.array_mib} MiB of int64 as case 1.",
        f"freight uses all {cores} cores; the target compares it with zstandard's single-threaded default. "
        "threads=-1 parallelises zstandard's compression only (decompression stays on one core) "
        "and is shown for information, without a target.",
    ]


# --------------------------------------------------------------------------------------------
# 3. auto on incompressible data
# --------------------------------------------------------------------------------------------


def case_auto(report: Report, cfg: Config) -> list[str]:
    arr = random_bits_float64(cfg.nbytes)
    n = arr.nbytes
    blob_none = freight.dumps(arr, compression=None)
    blob_auto = freight.dumps(arr, compression="auto")
    report.check(_same_bits(arr, freight.loads(blob_none)), "freight round trip differs (compression=None)")
    report.check(_same_bits(arr, freight.loads(blob_auto)), "freight round trip differs (compression='auto')")
    f = _frame(blob_auto)
    report.info["auto_incompressible_frame"] = f

    # For information: rng.random() floats, which "auto" does compress (lz4 + shuffle).
    uni = uniform_float64(cfg.nbytes)
    blob_uni_none = freight.dumps(uni)
    blob_uni_auto = freight.dumps(uni, compression="auto")
    report.check(_same_bits(uni, freight.loads(blob_uni_auto)), "freight round trip differs (auto, rng.random())")
    fu = _frame(blob_uni_auto)
    report.info["auto_uniform_frame"] = fu

    # The target pair is cheap and its difference small: three times the repetitions.
    t = time_interleaved(
        {
            "none_dumps": lambda: freight.dumps(arr, compression=None),
            "none_loads": lambda: freight.loads(blob_none),
            "auto_dumps": lambda: freight.dumps(arr, compression="auto"),
            "auto_loads": lambda: freight.loads(blob_auto),
        },
        3 * cfg.repeat,
        cfg.warmup,
    )
    t |= time_interleaved(
        {
            "uni_none_dumps": lambda: freight.dumps(uni, compression=None),
            "uni_none_loads": lambda: freight.loads(blob_uni_none),
            "uni_auto_dumps": lambda: freight.dumps(uni, compression="auto"),
            "uni_auto_loads": lambda: freight.loads(blob_uni_auto),
        },
        cfg.repeat,
        cfg.warmup,
    )
    cores = f"all ({ncpu()})"
    none = report.measure(
        Measurement("3", "random bits: compression=None", n, len(blob_none), t["none_dumps"], t["none_loads"], cores)
    )
    auto = report.measure(
        Measurement(
            "3", f"random bits: auto -> {f['codec']}", n, len(blob_auto), t["auto_dumps"], t["auto_loads"], cores
        )
    )
    uni_none = report.measure(
        Measurement(
            "3", "rng.random(): None (info)", n, len(blob_uni_none), t["uni_none_dumps"], t["uni_none_loads"], cores
        )
    )
    uni_auto = report.measure(
        Measurement(
            "3",
            f"rng.random(): auto -> {fu['codec']}, shuffle={fu['shuffle']} (info)",
            n,
            len(blob_uni_auto),
            t["uni_auto_dumps"],
            t["uni_auto_loads"],
            cores,
        )
    )

    slowdown = auto.total_ns / none.total_ns
    report.target(
        "3", "auto on incompressible: time auto / None", f"{slowdown:.3f}x", "<= 1.050x", slowdown <= 1.05, slowdown
    )
    report.target("3", "auto on incompressible: inspect codec", repr(f["codec"]), "'none'", f["codec"] == "none")
    report.info["auto_uniform_time_ratio"] = uni_auto.total_ns / uni_none.total_ns
    return [
        f"input: {cfg.array_mib} MiB of uniformly random 64-bit patterns viewed as float64 (incompressible "
        "with or without shuffle); times are dumps + loads.",
        f"rng.random() floats in [0, 1) are not incompressible: after the byte shuffle their exponent bytes "
        f"shrink, so auto keeps lz4 (stored/raw {fu['ratio']:.3f}, auto's threshold is 0.9); shown for "
        f"information (auto/None time {uni_auto.total_ns / uni_none.total_ns:.2f}x), no target.",
    ]


# --------------------------------------------------------------------------------------------
# 4. checksum verification
# --------------------------------------------------------------------------------------------


def case_verify(report: Report, cfg: Config) -> list[str]:
    arr = uniform_float64(cfg.nbytes)
    n = arr.nbytes
    # dumps writes frame checksums when asked (where payloads rest, Store.save and freight.dump
    # write them by default): this case measures what verifying them costs.
    blob = freight.dumps(arr, checksum=True)
    f = _frame(blob)
    report.info["verify_frame"] = f
    report.check(f["codec"] == "none", f"expected an uncompressed frame, got {f['codec']!r}")
    # A frame over 1 MiB is checked by its block digests (format 1.2), a smaller one by one checksum.
    report.check(bool(f.get("checksum") or f.get("digests")), "dumps wrote no frame checksum: nothing to verify")
    report.check(_same_bits(arr, freight.loads(blob)), "freight round trip differs (verified)")
    unverified = freight.loads(blob, verify=False)
    report.check(_same_bits(arr, unverified), "freight round trip differs (verify=False)")
    # Both paths must return a fresh writable copy, or the comparison is not like for like.
    blob_view = np.frombuffer(blob, dtype=np.uint8)
    for label, res in (("default", freight.loads(blob)), ("verify=False", unverified)):
        report.check(
            res.flags.writeable and not np.shares_memory(res, blob_view),
            f"loads(blob) ({label}) did not return a writable copy",
        )
    del unverified, res

    t = time_interleaved(
        {
            "verified": lambda: freight.loads(blob),
            "unverified": lambda: freight.loads(blob, verify=False),
        },
        3 * cfg.repeat,  # cheap operations, small differences: three times the repetitions
        cfg.warmup,
    )
    cores = f"all ({ncpu()})"
    v = report.measure(Measurement("4", "loads(blob) (verifies)", n, len(blob), None, t["verified"], cores))
    u = report.measure(Measurement("4", "loads(blob, verify=False)", n, len(blob), None, t["unverified"], cores))
    cost = (v.total_ns - u.total_ns) / v.total_ns
    report.target(
        "4",
        "verification cost: (verified - unverified) / verified",
        f"{cost * 100:.1f}%",
        "<= 5.0%",
        cost <= 0.05,
        cost,
    )
    return [
        f"input: {cfg.array_mib} MiB float64 (rng.random()), freight.dumps(checksum=True) (uncompressed, frame "
        f"checksums: digests={f.get('digests')}); only loads is timed, so 'total' = loads.",
    ]


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


CASES: dict[str, tuple[str, Callable[[Report, Config], list[str]]]] = {
    "1": ("lz4 on compressible int64 (vs python-lz4)", case_lz4),
    "2": ("zstd level 3 on compressible int64 (vs python-zstandard)", case_zstd),
    "3": ('compression="auto" on incompressible float64 (vs compression=None)', case_auto),
    "4": ("checksum verification in loads", case_verify),
}


_SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range(4_000_000): x += i\nprint(time.perf_counter() - t)"


def effective_cores(n: int) -> float | None:
    """How many cores' worth of CPU ``n`` concurrent busy processes get (ideally ``n``).

    On shared or throttled machines the CPUs the OS lists may not all be usable at once;
    freight's parallel compression then gains less over the single-threaded peers.
    """
    import subprocess

    def run(k: int) -> list[float]:
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE, text=True) for _ in range(k)]
        return [float(p.communicate()[0]) for p in procs]

    try:
        solo = min(run(1)[0], run(1)[0])
        together = statistics.mean(run(n))
        return n * solo / together if together > 0 else None
    except Exception:  # noqa: BLE001 - informational only
        return None


def environment(cfg: Config) -> dict[str, Any]:
    return {
        "freight": getattr(freight, "__version__", "?"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "lz4": getattr(lz4, "__version__", "?"),
        "lz4_library": lz4.library_version_string() if hasattr(lz4, "library_version_string") else "?",
        "zstandard": zstandard.__version__,
        "zstd_library": ".".join(map(str, zstandard.ZSTD_VERSION)),
        "cpu_count": ncpu(),
        "effective_cores": effective_cores(ncpu()),
        "platform": platform.platform(),
        "mode": "quick" if cfg.quick else "full",
        "array_mib": cfg.array_mib,
        "repeat": cfg.repeat,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        "bench_compression.py",
        "freight compression benchmarks against python-lz4 and python-zstandard.",
        "1234",
        "32 MiB arrays instead of 256 MiB, fewer repetitions",
        argv,
    )

    cfg = Config(args.quick)
    env = environment(cfg)
    print(
        f"freight {env['freight']} compression benchmarks ({env['mode']} mode, {cfg.array_mib} MiB, "
        f"{cfg.repeat} repetitions) - Python {env['python']}, numpy {env['numpy']}, lz4 {env['lz4']} "
        f"(liblz4 {env['lz4_library']}), zstandard {env['zstandard']} (libzstd {env['zstd_library']}), "
        f"{env['cpu_count']} CPUs, {env['platform']}"
    )
    eff = env["effective_cores"]
    if eff is not None:
        print(f"Effective parallelism: {eff:.2f} of {env['cpu_count']} CPUs (busy processes running at once).")
        if eff < 0.75 * env["cpu_count"]:
            print(
                "  warning: the listed CPUs cannot all run at full speed at once (shared or throttled machine); "
                "freight's multi-core figures will be low and the throughput targets may be missed."
            )
    print("Times are medians; throughput = raw bytes / (compress + decompress); size/raw: smaller is better.")

    report = Report()
    notes: dict[str, list[str]] = {}
    started = time.perf_counter()
    for key in args.cases:
        title, runner = CASES[key]
        try:
            notes[key] = runner(report, cfg)
        except Exception as exc:  # noqa: BLE001 - report the failure, run the other cases
            traceback.print_exc()
            report.check(False, f"case {key} failed: {type(exc).__name__}: {exc}")
            notes[key] = []
        report.print_case(key, title, notes[key])
        gc.collect()
    elapsed = time.perf_counter() - started

    misses = [f"{t.name}: {t.measured} (required {t.required})" for t in report.targets if not t.passed]
    return finish(
        args,
        sum(t.passed for t in report.targets),
        len(report.targets),
        elapsed,
        misses,
        report.errors,
        {
            "environment": env,
            "notes": notes,
            "info": report.info,
            "measurements": [m.as_dict() for m in report.measurements],
            "targets": [asdict(t) for t in report.targets],
        },
    )


if __name__ == "__main__":
    sys.exit(main())
