"""Fixtures for the documentation site's tests: the site built once (``mkdocs build --strict``,
as ``make docs`` builds it), served on a free loopback port, and a headless Chromium (Debian's
package, ``make chromium``) driven through its chromedriver by selenium.

Screenshots of the pages the browser test opens go to pytest's temporary folder, or to
``$FREIGHT_DOCS_SCREENSHOTS`` when that is set (to look at them)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import ROOT


@dataclass(frozen=True)
class Build:
    site: Path
    returncode: int
    output: str
    seconds: float


@pytest.fixture(scope="session")
def site_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The site, built once for the session, into a temporary folder."""
    site = tmp_path_factory.mktemp("site")
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        timeout=300,
    )
    return Build(site, proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - started)


@pytest.fixture(scope="session")
def site(site_build: Build) -> Path:
    if site_build.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{site_build.output[-4000:]}", pytrace=False)
    return site_build.site


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def site_url(site: Path) -> Iterator[str]:
    """The built site over HTTP on loopback (a free port), as a browser meets it."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _binary(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/bin/{name}",) if os.path.exists(p)), None)


# Headless on a closed network: no GPU, no sandbox (root), and none of the background fetches
# (component updates, sync, QUIC probes) that would retry against hosts it cannot reach.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A headless Chromium under selenium, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _binary("chromium"), _binary("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium or chromedriver is not installed: run `make chromium`", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    # The driver is given: selenium's own manager, which would download one, is never asked.
    service = Service(executable_path=driver, log_output=str(log))
    session = webdriver.Chrome(options=options, service=service)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("FREIGHT_DOCS_SCREENSHOTS")
    if where:
        path = Path(where)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("screenshots")
