"""The built site in a real browser (headless Chromium): the home page, an integration page, the
benchmarks page with every plot loaded, and the API reference render, with no failed request or
script error. Each page is also saved as a screenshot (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import ROOT

PLOTS = sorted(p.name for p in (ROOT / "benchmarks" / "results").glob("*.png"))

# The page's own script errors and failed requests (a missing asset, a 404) reach the console as
# SEVERE entries.
CONSOLE_LEVEL = "SEVERE"


def open_page(browser, site_url: str, path: str, screenshots: Path, name: str):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{site_url}/{path}")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    browser.get_log("browser")  # (drained here; checked after each test's own look)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(height, 800), 6000))
    browser.save_screenshot(str(screenshots / f"{name}.png"))
    browser.set_window_size(1280, 1000)
    return browser


def console_errors(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == CONSOLE_LEVEL]


def text_of(browser, css: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css).text


def test_the_home_page_renders(browser, site_url, screenshots):
    from selenium.webdriver.common.by import By

    page = open_page(browser, site_url, "", screenshots, "index")
    assert "freight" in page.title
    assert text_of(page, "article h1") == "freight"
    assert "pip install freight" in text_of(page, "article")
    # The navigation reaches every part of the site.
    nav = text_of(page, "nav.md-nav--primary")
    for section in ("Getting started", "User guide", "Integrations", "Benchmarks", "Reference", "Changelog"):
        assert section in nav, section
    # The README's links into docs/ became the site's own pages.
    links = [a.get_attribute("href") for a in page.find_elements(By.CSS_SELECTOR, "article a")]
    assert any(h.endswith("/getting-started/") or "/getting-started/#" in h for h in links), links
    assert not [h for h in links if "docs/" in h or h.endswith(".md")], links
    assert console_errors(page) == []


def test_an_integration_page_renders(browser, site_url, screenshots):
    from selenium.webdriver.common.by import By

    page = open_page(browser, site_url, "integrations/dask/", screenshots, "integration-dask")
    assert text_of(page, "article h1") == "freight with Dask distributed"
    tables = [t.text for t in page.find_elements(By.CSS_SELECTOR, "article table")]
    # The committed engine rows, brought in from benchmarks/results/engines.md.
    assert any("100k-row DataFrames" in t and "1.55×" in t for t in tables), tables[:2]
    assert page.find_elements(By.CSS_SELECTOR, ".highlight code")  # the code blocks are highlighted
    assert console_errors(page) == []


def test_the_benchmarks_page_renders_with_its_plots(browser, site_url, screenshots):
    page = open_page(browser, site_url, "benchmarks/", screenshots, "benchmarks")
    assert text_of(page, "article h1") == "Benchmarks"
    images = page.execute_script(
        "return Array.from(document.querySelectorAll('article img')).map("
        "i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.naturalHeight])"
    )
    # Every plot of benchmarks/results (report and engines), each loaded: decoded, not a broken image.
    assert sorted({src.rsplit("/", 1)[-1] for src, *_ in images}) == PLOTS
    for src, complete, width, height in images:
        assert complete and width > 0 and height > 0, src
    assert "Where freight is slower" in text_of(page, "article")
    assert console_errors(page) == []


def test_the_api_reference_renders(browser, site_url, screenshots):
    from selenium.webdriver.common.by import By

    page = open_page(browser, site_url, "reference/api/", screenshots, "api-reference")
    for anchor in (
        "freight.Freight",
        "freight.Freight.dump",
        "freight.FreightOptions",
        "freight.inspect",
        "freight.exceptions.FreightError",
    ):
        assert page.find_elements(By.ID, anchor), anchor
    # The four codec methods bound from Rust, documented from the stubs, with their options.
    for method in ("dumps", "loads", "dumps_frames", "loads_frames"):
        heading = page.find_element(By.ID, f"freight._freight.Codec.{method}")
        block = heading.find_element(By.XPATH, "./..")
        assert method in block.text and ("frame" in block.text or "payload" in block.text), method
    assert "allow_pickle" in text_of(page, "article")
    assert console_errors(page) == []


@pytest.mark.parametrize("path", ["getting-started/", "guide/storage/", "FORMAT/", "changelog/"])
def test_other_pages_render(browser, site_url, screenshots, path):
    page = open_page(browser, site_url, path, screenshots, path.strip("/").replace("/", "-"))
    assert text_of(page, "article h1")
    assert console_errors(page) == []
