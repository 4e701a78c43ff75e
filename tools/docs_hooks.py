"""mkdocs hooks for freight's documentation site (mkdocs.yml: ``hooks:``).

The site is built from docs/ plus files that live elsewhere in the repository and are never
copied by hand, so that no figure or text exists twice:

- ``<!-- include: PATH -->`` in a page is replaced by the repository file PATH (README.md,
  CHANGELOG.md, CONTRIBUTING.md, benchmarks/results/report.md, ...). Its relative links are
  rewritten for the page that includes it (``docs/X.md`` becomes the site's page ``X.md``,
  README.md the home page, the results' plots their copies in the site); ``shift=N`` pushes its
  headings N levels down, ``from=TEXT`` starts it at the first line holding TEXT, ``title=drop``
  leaves out its first line when that is a title (``# ...``). A link to a file
  the site does not have is left as it is, so that ``mkdocs build --strict`` fails on it.
- ``<!-- results-date: PATH -->`` becomes the date of the commit that last changed PATH.
- ``<!-- engine-rows: NAME -->`` becomes the rows of benchmarks/results/engines.md for that
  engine (its throughput table), with the run's date: each integration page quotes the committed
  run, never a copy of its figures.
- The plots of benchmarks/results (``*.png``) are added to the site under the same path.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"
ENGINES = f"{RESULTS}/engines.md"

# Repository files that are pages of the site under another name.
PAGES = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "CONTRIBUTING.md": "contributing.md",
    "LICENSE": "license.md",
}

_INCLUDE = re.compile(r"^<!--\s*include:\s*(?P<path>\S+)(?P<args>[^>]*?)\s*-->[ \t]*$", re.M)
_DATE = re.compile(r"<!--\s*results-date:\s*(?P<path>\S+)\s*-->")
_ENGINE_ROWS = re.compile(r"^<!--\s*engine-rows:\s*(?P<names>[^>]+?)\s*-->[ \t]*$", re.M)
# A markdown link or image whose target is relative: ](target) or ](target#anchor).
_LINK = re.compile(r"(?P<open>!?\[[^\]]*\]\()(?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?(?P<close>\))")
_FENCE = re.compile(r"^(```|~~~)")


def on_files(files: Files, config: Any) -> Files:
    for png in sorted((ROOT / RESULTS).glob("*.png")):
        uri = f"{RESULTS}/{png.name}"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    src = page.file.src_uri
    markdown = _INCLUDE.sub(lambda m: include(m.group("path"), src, _args(m.group("args"))), markdown)
    markdown = _ENGINE_ROWS.sub(lambda m: engine_rows([n.strip() for n in m.group("names").split(",")], src), markdown)
    return _DATE.sub(lambda m: last_changed(m.group("path")), markdown)


def _args(text: str) -> dict[str, str]:
    """``shift=1 from="## Tables"`` -> {"shift": "1", "from": "## Tables"}."""
    return {k: a or b for k, a, b in re.findall(r'(\w+)=(?:"([^"]*)"|(\S+))', text)}


def include(path: str, page_src: str, args: dict[str, str]) -> str:
    """The repository file ``path``, its links rewritten for the page ``page_src``."""
    text = (ROOT / path).read_text()
    if "from" in args:
        at = text.find(args["from"])
        if at < 0:
            raise ValueError(f"{page_src}: include of {path}: no line holds {args['from']!r}")
        text = text[text.rfind("\n", 0, at) + 1 :]
    if args.get("title") == "drop" and text.startswith("# "):
        text = text.split("\n", 1)[1].lstrip("\n")
    shift = int(args.get("shift", "0"))
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            if shift and line.startswith("#"):
                line = "#" * shift + line
            line = _LINK.sub(lambda m: _relink(m, path, page_src), line)
        out.append(line)
    return "\n".join(out) + "\n"


def site_path(repo_path: str) -> str | None:
    """Where the repository file ``repo_path`` is in the site (a path under docs/), or None."""
    if repo_path in PAGES:
        return PAGES[repo_path]
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/") :]
    if repo_path.startswith(f"{RESULTS}/") and repo_path.endswith(".png"):
        return repo_path
    if repo_path == ENGINES or repo_path == f"{RESULTS}/report.md":
        return "benchmarks.md"
    return None


def _relink(m: re.Match[str], included: str, page_src: str) -> str:
    target = m.group("target")
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return m.group(0)  # a URL, or absolute
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(included), target))
    where = site_path(repo_path)
    if where is None:
        return m.group(0)
    new = posixpath.relpath(where, posixpath.dirname(page_src) or ".")
    return f"{m.group('open')}{new}{m.group('anchor') or ''}{m.group('close')}"


def last_changed(path: str) -> str:
    """The date (YYYY-MM-DD) of the last commit that changed ``path``; "uncommitted" if none."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ad", "--date=short", "--", path],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or "uncommitted"


def engine_rows(names: list[str], page_src: str) -> str:
    """The throughput rows of benchmarks/results/engines.md whose engine is one of ``names``."""
    lines = (ROOT / ENGINES).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| engine | workload |"))
    header, rule = lines[start], lines[start + 1]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        if line.split("|")[1].strip() in names:
            rows.append(line)
    if not rows:
        raise ValueError(f"{ENGINES} has no rows for {names}")
    date = last_changed(ENGINES)
    page = posixpath.relpath("benchmarks.md", posixpath.dirname(page_src) or ".")
    intro = (
        f"From the committed run of `python -m freight bench --engines` ({date}; "
        f"[Benchmarks]({page}#engines-end-to-end) has the machine, every engine and the method):"
    )
    return "\n".join([intro, "", header, rule, *rows]) + "\n"
