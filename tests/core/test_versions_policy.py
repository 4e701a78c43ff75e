"""The promise in freight._versions: which crossings load quietly, and how a failure names the
library and both versions (the crossings themselves: tests/golden/test_versions_crossing.py)."""

from __future__ import annotations

import warnings

import pytest

import freight
from freight import _versions
from support import GOLDEN, ROOT

OLD = GOLDEN / "old"


@pytest.mark.parametrize(
    ("name", "written", "here", "promised"),
    [
        ("pandas", "2.2.3", "3.1.1", True),
        ("pandas", "3.1.1", "2.2.0", True),
        ("pandas", "2.1.4", "3.1.1", False),  # older than the oldest tested
        ("pandas", "3.1.1", "4.0.0", False),  # a major nobody tested
        ("numpy", "1.26.4", "2.4.6", True),
        ("numpy", "1.25.2", "2.4.6", False),
        ("pyarrow", "17.0.0", "26.0.1", True),
        ("pyarrow", "15.0.0", "40.0.0", True),  # any major from 15: the C data interface is stable
        ("pyarrow", "14.0.2", "26.0.1", False),
        ("polars", "1.44.2", "2.1.0", True),
        ("polars", "0.20.31", "2.1.0", False),
        ("fakelib", "1.0", "2.0", False),
        ("pandas", "3.0.0rc1", "2.2.3", True),
        ("pandas", "unknown", "2.2.3", False),
    ],
)
def test_promised(name: str, written: str, here: str, promised: bool) -> None:
    assert _versions.promised(name, written, here) is promised


@pytest.fixture
def pandas_here(monkeypatch):
    """Sets the pandas version this process reports to the policy."""
    installed = dict(_versions._INSTALLED)
    monkeypatch.setattr(_versions, "_INSTALLED", installed)

    def set_version(version: str) -> None:
        installed["pandas"] = version

    return set_version


def test_an_unpromised_major_still_warns_and_strict_refuses(pandas_here) -> None:
    data = (OLD / "pd_nullable.frt").read_bytes()  # written with pandas 2.2.3
    pandas_here("4.0.0")
    with pytest.warns(freight.FreightWarning, match=r"pandas 2\.2\.3.*pandas 4\.0\.0"):
        freight.loads(data)
    with pytest.raises(freight.ProducerVersionError, match=r"pandas 2\.2\.3.*pandas 4\.0\.0"):
        freight.loads(data, strict_versions=True)


def test_a_promised_crossing_says_nothing(pandas_here) -> None:
    data = (OLD / "pd_nullable.frt").read_bytes()
    pandas_here("3.0.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        freight.loads(data, strict_versions=True)
    assert _versions.written("pandas") == "2.2.3"  # kept for the serializers' errors


def test_a_failed_crossing_names_both_versions(pandas_here, monkeypatch) -> None:
    monkeypatch.setattr(_versions._loading, "versions", {"pandas": "3.1.1"}, raising=False)
    pandas_here("2.2.3")
    cause = freight.DeserializationError("the payload holds an invalid pandas.Series: boom")
    error = _versions.failed_crossing("pandas", "pandas.Series", cause)
    assert isinstance(error, freight.ProducerVersionError)
    text = str(error)
    assert "boom" in text and "pandas 3.1.1" in text and "pandas 2.2.3" in text and "report it" in text
    pandas_here("3.1.1")  # same versions: a corrupt payload, not a crossing
    assert _versions.failed_crossing("pandas", "pandas.Series", cause) is None


def test_refusal_says_what_to_do(pandas_here, monkeypatch) -> None:
    monkeypatch.setattr(_versions._loading, "versions", {"pandas": "3.1.1"}, raising=False)
    pandas_here("2.2.3")
    error = _versions.refusal("pandas", "a str column cannot load", "install pandas >= 2.3")
    assert str(error) == (
        "a str column cannot load: the payload was written with pandas 3.1.1, and this process has "
        "pandas 2.2.3; install pandas >= 2.3"
    )


def test_pickle_refusal_finds_the_library(monkeypatch) -> None:
    monkeypatch.setattr(_versions._loading, "versions", {"numpy": "2.4.6"}, raising=False)
    monkeypatch.setattr(_versions, "_INSTALLED", {**_versions._INSTALLED, "numpy": "1.26.4"})
    # what numpy 1 raises on numpy 2's pickle of a StringDType array
    exc = AttributeError(
        "Can't get attribute '_convert_to_stringdtype_kwargs' on <module 'numpy.core._internal' from '/x.py'>"
    )
    error = _versions.pickle_refusal(exc)
    assert isinstance(error, freight.ProducerVersionError)
    assert "numpy 2.4.6" in str(error) and "numpy 1.26.4" in str(error)
    missing = ModuleNotFoundError("No module named 'numpy._core.new'", name="numpy._core.new")
    assert _versions.pickle_refusal(missing) is not None
    assert _versions.pickle_refusal(AttributeError("no module in this message")) is None
    assert _versions.pickle_refusal(ModuleNotFoundError("x", name="somelib.sub")) is None  # no version recorded


# --------------------------------------------------------------------------------------------
# Issue 30: where the docs say another major version warns, they say which crossings do not
# --------------------------------------------------------------------------------------------

_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# What shows that a passage names the promised crossings, speaks of the promise, or links to a
# page that lists them (the guide's Fidelity page, Architecture's "Version crossings").
_CROSSINGS = ("numpy 1.26", "promise", "version-crossings", "fidelity.md")


def _passages(text: str) -> list[str]:
    """Paragraphs, with each list item and table row on its own, whitespace folded."""
    out: list[str] = []
    for paragraph in text.split("\n\n"):
        item: list[str] = []
        for line in paragraph.splitlines():
            if line.lstrip().startswith(("- ", "* ", "|")) and item:
                out.append(" ".join(item))
                item = []
            item.append(line.strip())
        out.append(" ".join(item))
    return [" ".join(p.split()) for p in out if p.strip()]


def _says_another_major_warns(passage: str) -> bool:
    lowered = passage.lower()
    return "another major version" in lowered and any(
        word in passage for word in ("warn", "FreightWarning", "ProducerVersionError")
    )


def test_the_docs_name_the_crossings_that_load_silently_wherever_they_say_majors_warn() -> None:
    """A numpy 1.26 or pandas 2.2 payload loads with no warning, even with strict_versions=True
    (the promise in ``_versions.PROMISED``); a passage saying that another major version warns
    must say so, or link to the list."""
    assert {"numpy", "pandas", "pyarrow", "polars"} == set(_versions.PROMISED)
    silent = []
    for path in _DOCS:
        for passage in _passages(path.read_text(encoding="utf-8")):
            if _says_another_major_warns(passage) and not any(mark in passage for mark in _CROSSINGS):
                silent.append(f"{path.relative_to(ROOT)}: {passage[:160]}")
    assert not silent, "these say another major version warns, without the promised crossings:\n" + "\n".join(silent)
