"""The README's headline figures are the committed results' (benchmarks/results/engines.md and
report.md), cell for cell: a rerun of the benchmark that changes them fails here until the
README quotes the new ones. The README holds figures in its Performance section only."""

from __future__ import annotations

import re

from support import ROOT

README = (ROOT / "README.md").read_text()
RESULTS = ROOT / "benchmarks" / "results"
FIGURE = re.compile(r"\d+(?:\.\d+)?×")


def _tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text``: rows of cells (header first, the rule left out)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_the_readme_gives_figures_in_one_place():
    outside = README.replace(_section(README, "Performance"), "")
    assert not FIGURE.search(outside), FIGURE.findall(outside)


def test_the_readme_engine_figures_are_the_committed_ones():
    (readme,) = [t for t in _tables(_section(README, "Performance")) if t[0][:2] == ["engine", "workload"]]
    results = next(t for t in _tables((RESULTS / "engines.md").read_text()) if "ratio" in t[0])
    ratio = results[0].index("ratio")
    committed = {(row[0], row[1]): row[ratio] for row in results[1:]}
    assert len(readme) > 3
    for engine, workload, figure in readme[1:]:
        assert committed.get((engine, workload)) == figure, (engine, workload, figure)


def test_the_readme_table_figures_are_the_committed_ones():
    (readme,) = [t for t in _tables(_section(README, "Performance")) if t[0][0] == "rows"]
    report = _section((RESULTS / "report.md").read_text(), "Tables against pickle-5")
    (results,) = [t for t in _tables(report) if t[0][0] == "rows"]
    committed = {row[0]: dict(zip(results[0], row)) for row in results[1:]}
    for row in readme[1:]:
        for column, figure in zip(readme[0][1:], row[1:]):
            assert committed[row[0]][column] == figure, (row[0], column, figure)
