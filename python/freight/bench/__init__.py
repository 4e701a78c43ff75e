"""``freight bench``: freight against every peer, over sizes, with a report and plots.

    python -m freight bench                        # the full suite (several minutes on 2 cores)
    python -m freight bench --quick                # under a minute: smaller sizes, fewer samples
    python -m freight bench --only pandas,numpy --out results/
    python -m freight bench --compare old/results.json new/results.json
    python -m freight bench --storage [--quick]    # values read in part against whole loads

Writes ``results.json`` (every measurement, its allocator states and peak memory, the
like-for-like comparisons, the machine), ``report.md`` (a table per workload with ratios against
pickle-5 and the best like-for-like peer, and where freight is slower) and PNG plots into
``--out``. Ships with freight: ``pip install "freight[bench]"`` adds matplotlib (the plots) and
tqdm (the progress bar); peers that are not installed are skipped and listed in the report as not
measured. From a clone, ``make bench`` also installs every peer and rewrites benchmarks/results.

Modules: ``workloads`` (what is serialized), ``peers`` (who is compared), ``runner`` (which
size is measured where), ``point`` (timing one size), ``alloc`` (allocator states, resident
memory), ``child`` (fresh processes), ``memory`` (peak-memory probes), ``ratios`` (who meets
whom), ``report`` (markdown, --compare), ``plots`` (matplotlib), ``harness`` (timing and
formatting shared with the target scripts in the repository's benchmarks/).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from freight.bench.harness import parse_size


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="freight bench",
        description="Measure freight against pickle, cloudpickle, Dask, ProxyStore, pyfory, the libraries' "
        "own formats and compressors, over sizes; write results.json, report.md and PNG plots.",
    )
    p.add_argument(
        "--quick", action="store_true", help="sizes up to 64 MiB / 100k rows, every other size, fewer samples"
    )
    p.add_argument("--only", metavar="LIST", help="comma-separated workload groups or names (see --list)")
    p.add_argument("--out", metavar="DIR", default="freight-bench", help="where to write (default: ./freight-bench)")
    p.add_argument("--max-size", metavar="SIZE", help="skip sizes above SIZE bytes (rows above SIZE/64), e.g. 16MiB")
    p.add_argument("--repeat", type=int, metavar="N", help="exactly N samples per measurement (default: adaptive)")
    p.add_argument("--no-plots", action="store_true", help="write results.json and report.md only")
    p.add_argument(
        "--no-memory", action="store_true", help="no peak-memory probes (a child process per peer and size ≥ 1 MiB)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the workloads and peers, then exit")
    p.add_argument(
        "--engines",
        action="store_true",
        help="end to end on Dask, Scaler, ProxyStore and Ray: each engine's default against freight "
        "(--only picks engines); writes engines.json, engines.md, engines.png",
    )
    p.add_argument(
        "--storage",
        action="store_true",
        help="values read in part (Store.lazy) against whole loads, on a local store and on an s3s-fs server: "
        "one array of eight, 1,000 rows of a 10M-row array, one column of ten; writes storage.json, storage.md, "
        "storage.png",
    )
    p.add_argument(
        "--compare", nargs=2, metavar=("OLD", "NEW"), help="print what got faster or slower between two results.json"
    )
    p.add_argument(
        "--render", metavar="RESULTS", help="write report.md and the plots again from a results.json (no measuring)"
    )
    p.add_argument(
        "--merge",
        metavar="NEWER",
        action="append",
        default=[],
        help="with --render: replace the workloads a later results.json measured (same settings) by its rows",
    )
    p.add_argument("--threshold", type=float, default=0.10, help="--compare: smallest change shown (default 0.10)")
    return p


def _list() -> None:
    from freight.bench.peers import PEERS, for_kind
    from freight.bench.workloads import WORKLOADS

    for w in WORKLOADS:
        sizes = w.sizes_for(False, None)
        span = f"{w.label(sizes[0])} .. {w.label(sizes[-1])}" if w.axis != "case" else ", ".join(map(str, sizes))
        peers = ", ".join(p.name + (" (not installed)" if p.missing() else "") for p in for_kind(w.kind, PEERS))
        print(f"{w.group:12} {w.name:18} {span}\n{'':31}{peers}")


def _summary(results: dict) -> None:
    from freight.bench.ratios import losses

    lost = losses(results)
    n = len(results["measurements"])
    print(f"{n} measurements in {results['elapsed_s']} s; freight slower in {len(lost)} like-for-like comparisons:")
    for c in lost[:40]:
        state = f" ({c['state']})" if len(c["by_state"]) > 1 else ""
        print(f"  {c['workload']:18} {c['direction']:5} {c['label']:>12}  {c['ours']} vs {c['other']}: "
              f"{c['ratio']:.2f}×{state}")  # fmt: skip
    if len(lost) > 40:
        print(f"  ... and {len(lost) - 40} more (report.md lists them all)")
    for e in results["errors"]:
        print(f"  error: {e}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        _list()
        return 0
    if args.engines:
        from freight.bench import engines

        return engines.main(args.quick, args.only, args.out, args.repeat, progress=not args.no_progress)
    if args.storage:
        from freight.bench import storage

        return storage.main(args.quick, args.out, args.repeat, plots=not args.no_plots)
    if args.compare:
        from freight.bench.report import compare

        print(compare(*args.compare, threshold=args.threshold))
        return 0
    from freight.bench.ratios import comparisons
    from freight.bench.report import render
    from freight.bench.runner import Settings, run
    from freight.bench.workloads import select

    try:
        workloads = select(args.only)
        max_bytes = parse_size(args.max_size) if args.max_size else None
    except ValueError as exc:
        print(f"freight bench: {exc}", file=sys.stderr)
        return 2
    if args.repeat is not None and args.repeat < 1:
        print("freight bench: --repeat must be at least 1", file=sys.stderr)
        return 2
    plots_ok = not args.no_plots
    if plots_ok:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(
                'freight bench: matplotlib is not installed (pip install "freight[bench]"); no plots', file=sys.stderr
            )
            plots_ok = False
    os.makedirs(args.out, exist_ok=True)
    if args.merge and not args.render:
        print("freight bench: --merge NEWER goes with --render RESULTS (the run it joins)", file=sys.stderr)
        return 2
    if args.render:
        from freight.bench.merge import merge

        with open(args.render) as fh:
            results = json.load(fh)
        for path in args.merge:
            with open(path) as fh:
                try:
                    results = merge(results, json.load(fh))
                except ValueError as exc:
                    print(f"freight bench: {exc}", file=sys.stderr)
                    return 2
    else:
        settings = Settings.make(args.quick, max_bytes, args.repeat, memory=not args.no_memory)
        results = run(workloads, settings, progress=not args.no_progress)
    plots: list[str] = []
    if plots_ok:
        from freight.bench.plots import write_plots

        plots = write_plots(results, args.out)
    results["plots"] = plots
    results["comparisons"] = comparisons(results)  # derived, for readers of the file: both states' ratios
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    with open(os.path.join(args.out, "report.md"), "w") as fh:
        fh.write(render(results, plots))
    _summary(results)
    print(f"wrote {args.out}/results.json, report.md and {len(plots)} plots")
    return 1 if results["errors"] else 0
