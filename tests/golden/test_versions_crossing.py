"""Version crossings, both ways (docs/ARCHITECTURE.md, "Version crossings"): payloads written
under numpy 1.26 / pandas 2.2 / pyarrow 17 / polars 1 load here (numpy 2 / pandas 3 / current
pyarrow and polars) with the values they held, and payloads written here load there, or are
refused with a ProducerVersionError naming the library and both versions.

Old -> new reads ``tests/golden/old/`` (written once under ``.venv-old``, see
``tests/golden/crossing.py``) and needs nothing else. New -> old runs ``crossing.py check``
under ``.venv-old`` (``make old-versions``; ``make test`` builds it first): without it the test
skips, except under make, where it fails."""

from __future__ import annotations

import json
import os
import subprocess
import warnings

import pytest

import crossing
import freight
from crossing_cases import CASES, major, minor
from support import GOLDEN, ROOT

OLD = GOLDEN / "old"
OLD_PYTHON = ROOT / ".venv-old" / "bin" / "python"

MANIFEST = json.loads((OLD / "expected.json").read_text())

# Crossings whose refusal needs a change outside this suite's files; strict, so that the change
# shows up here as an XPASS to remove from this list.
PENDING: dict[str, str] = {}


def test_old_payloads_come_from_the_old_generation() -> None:
    written = MANIFEST["versions"]
    assert major(written["numpy"]) == 1 and minor(written["numpy"]) >= (1, 26)
    assert minor(written["pandas"]) == (2, 2)
    assert major(written["pyarrow"]) == 17
    assert major(written["polars"]) == 1
    # every case has a payload, but those the old generation cannot build (a new case: run
    # crossing.py write under .venv-old, which adds the missing ones)
    assert set(CASES) - set(MANIFEST["cases"]) == {"np_stringdtype", "pa_decimal32", "pd_str_nan_python"}


@pytest.mark.parametrize("name", sorted(MANIFEST["cases"]))
def test_old_payload_loads_here(name: str) -> None:
    assert crossing.check_case(OLD, name, MANIFEST) is None


def test_old_strings_travel_without_pickle() -> None:
    # pandas 2.2's string[pyarrow_numpy] (future.infer_string) goes through Arrow, not pickle:
    # pandas 3 has no class of that name to unpickle.
    info = freight.inspect((OLD / "pd_str_nan_pyarrow.frt").read_bytes())
    assert not info["needs_pickle"]
    got = freight.loads((OLD / "pd_str_nan_pyarrow.frt").read_bytes())
    assert str(got.dtype) == "str"


def test_promised_crossings_load_quietly_even_when_strict() -> None:
    data = (OLD / "pd_numbers_with_string_labels.frt").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        freight.loads(data, strict_versions=True)


@pytest.fixture(scope="module")
def old_side(tmp_path_factory) -> dict:
    """What ``.venv-old`` makes of the payloads this process writes."""
    if not OLD_PYTHON.exists():
        message = ".venv-old is missing: run `make old-versions` (numpy 1.26, pandas 2.2, pyarrow 17, polars 1)"
        if os.environ.get("MAKELEVEL"):  # under make, which builds it first: missing is a failure
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("crossing")
    crossing.write(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(ROOT / "python")  # freight's package, with the extension make built
    done = subprocess.run(
        [str(OLD_PYTHON), str(GOLDEN / "crossing.py"), "check", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_old_side_runs_the_old_generation(old_side: dict) -> None:
    assert old_side["versions"] == MANIFEST["versions"]


def _marked(name: str):
    if name in PENDING:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=PENDING[name]))
    return name


@pytest.mark.parametrize("name", [_marked(name) for name in CASES])
def test_payload_written_here_loads_under_old_versions(old_side: dict, name: str) -> None:
    assert old_side["report"][name] is None


@pytest.mark.parametrize("name", [_marked(name) for name in CASES if name.startswith("pd_")])
def test_payload_written_here_loads_under_pandas_2_with_infer_string(old_side: dict, name: str) -> None:
    assert old_side["infer_string"][name] is None
