"""The documentation site builds with ``mkdocs build --strict`` (no broken link or anchor, no missing
reference, no page left out of the navigation), quickly, with every page and every plot; the
files it brings in from elsewhere in the repository (README.md, CHANGELOG.md, the benchmark
results) are there, never copies."""

from __future__ import annotations

import re

import yaml

from support import ROOT

DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
# The build takes a few seconds; a minute would mean something went wrong (a plugin fetching).
BUILD_BUDGET_S = 60


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in _nav_pages(v)]
    if isinstance(nav, list):
        return [p for v in nav for p in _nav_pages(v)]
    return []


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_the_site_builds_strictly_and_quickly(site_build):
    assert site_build.returncode == 0, site_build.output[-4000:]
    assert not re.search(r"^(WARNING|ERROR)\b", site_build.output, re.M), site_build.output[-4000:]
    assert site_build.seconds < BUILD_BUDGET_S, site_build.seconds


def test_every_page_is_in_the_navigation_and_built(site):
    pages = _nav_pages(_config()["nav"])
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert set(pages) == on_disk  # a page outside the nav is unreachable; one in the nav but absent breaks it
    for page in pages:
        out = "index.html" if page == "index.md" else page.removesuffix(".md").removesuffix("/index") + "/index.html"
        assert (site / out).exists(), out


def test_the_included_files_are_in_the_site(site):
    index = (site / "index.html").read_text()
    assert "A first example" in index  # README.md is the home page
    changelog = (site / "changelog" / "index.html").read_text()
    assert "Unreleased" in changelog
    assert "make test" in (site / "contributing" / "index.html").read_text()
    assert "MIT License" in (site / "license" / "index.html").read_text()
    benchmarks = (site / "benchmarks" / "index.html").read_text()
    report = (RESULTS / "report.md").read_text()
    assert report.splitlines()[2].split(",")[0] in benchmarks  # the run's start time
    for png in RESULTS.glob("*.png"):
        assert (site / "benchmarks" / "results" / png.name).read_bytes() == png.read_bytes()
        assert f"results/{png.name}" in benchmarks, png.name
    for html in site.rglob("*.html"):  # every marker of tools/docs_hooks.py was replaced
        assert not re.search(r"<!--\s*(include|engine-rows|results-date):", html.read_text()), html


def test_each_integration_page_quotes_the_committed_engine_rows(site):
    for page in sorted((DOCS / "integrations").glob("*.md")):
        if page.name == "index.md":
            continue
        assert "<!-- engine-rows:" in page.read_text(), page.name
        html = (site / "integrations" / page.stem / "index.html").read_text()
        assert "From the committed run of" in html, page.name


def test_the_api_reference_documents_the_codec_methods_from_the_stubs(site):
    html = (site / "reference" / "api" / "index.html").read_text()
    for method in ("dumps", "loads", "dumps_frames", "loads_frames"):
        assert f'id="freight._freight.Codec.{method}"' in html, method
    assert "Serializes" in html and "Deserializes" in html  # their docstrings, from _freight.pyi
    for name in (
        "freight.Freight",
        "freight.FreightOptions",
        "freight.Freight.dump",
        "freight.Freight.load",
        "freight.inspect",
    ):
        assert f'id="{name}"' in html, name
