"""bench_core.py's results: one ``Row`` per measurement (freight against a peer, or against an
absolute limit), the ``Report`` that prints them case by case, and the checks that a value
round-tripped (a failure is an error of the run, not a missed target)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from freight.bench.harness import Timing, fmt_ns, print_table


@dataclass
class Row:
    case: str
    operation: str
    freight_ns: float | None
    peer: str | None = None
    peer_ns: float | None = None
    target: str = ""
    passed: bool | None = None  # None: informational, no target
    note: str = ""
    freight_timing: dict | None = None
    peer_timing: dict | None = None

    @property
    def ratio(self) -> float | None:
        if self.peer_ns is None or not self.freight_ns:
            return None
        return self.peer_ns / self.freight_ns


class Report:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.extra: dict[str, Any] = {}
        self.errors: list[str] = []

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def print_case(self, case: str, title: str) -> None:
        rows = [r for r in self.rows if r.case == case]
        print()
        print(f"== {title} ==")
        headers = ["operation", "freight", "peer", "peer time", "ratio", "target", "result"]
        table: list[list[str]] = []
        last_op = None
        for r in rows:
            ratio = r.ratio
            result = "" if r.passed is None else ("PASS" if r.passed else "MISS")
            same_op = r.operation == last_op
            table.append(
                [
                    "" if same_op else r.operation,
                    "" if same_op else fmt_ns(r.freight_ns),
                    r.peer or "",
                    fmt_ns(r.peer_ns) if r.peer else "",
                    f"{ratio:.2f}x" if ratio is not None else "",
                    r.target,
                    result,
                ]
            )
            last_op = r.operation
        print_table(headers, table)
        notes = [r.note for r in rows if r.note]
        for n in dict.fromkeys(notes):
            print(f"  note: {n}")
        sys.stdout.flush()

    def summary(self) -> tuple[int, int]:
        checked = [r for r in self.rows if r.passed is not None]
        return sum(r.passed for r in checked), len(checked)


def timing_dict(t: Timing | None) -> dict | None:
    if t is None:
        return None
    d = asdict(t)
    d["samples_ns"] = [round(s, 1) for s in t.samples_ns]
    return d


def compare(
    report: Report,
    case: str,
    operation: str,
    freight_t: Timing,
    peers: list[tuple[str, Timing | None, str, Callable[[float], bool] | None]],
    note: str = "",
) -> None:
    """Adds one row per peer. Each peer: (name, timing, target text, check(ratio) or None)."""
    if not peers:
        report.add(Row(case, operation, freight_t.median_ns, note=note, freight_timing=timing_dict(freight_t)))
        return
    for name, t, target, check in peers:
        row = Row(
            case,
            operation,
            freight_t.median_ns,
            peer=name,
            peer_ns=t.median_ns if t else None,
            target=target,
            note=note,
            freight_timing=timing_dict(freight_t),
            peer_timing=timing_dict(t),
        )
        if check is not None and row.ratio is not None:
            row.passed = bool(check(row.ratio))
        report.add(row)


def absolute(report: Report, case: str, operation: str, t: Timing, limit_ns: float, note: str = "") -> None:
    report.add(
        Row(
            case,
            operation,
            t.median_ns,
            target=f"< {fmt_ns(limit_ns)}",
            passed=t.median_ns < limit_ns,
            note=note,
            freight_timing=timing_dict(t),
        )
    )


def check(report: Report, ok: bool, what: str) -> None:
    if not ok:
        report.errors.append(what)
        print(f"  ERROR: {what}", file=sys.stderr)
