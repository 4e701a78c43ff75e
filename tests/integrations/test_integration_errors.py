"""Issue 30, the integrations' errors, each in a child interpreter:

* used without its library, every integration raises ``freight.MissingDependencyError`` (a
  FreightError and an ImportError) naming the extra to install, never a bare
  ``ModuleNotFoundError``: at ``install()`` for the modules that import without their engine
  (dask, ray, joblib), at import for the others (celery, parsl, mpi4py), at ``freight_store`` for
  ProxyStore. The library is blocked (``sys.modules[name] = None``, as if it were not installed);
* a misspelled option is an ``OptionError`` naming the function as the user called it (not the
  ``Freight.replace()`` the options are passed to) and the option meant;
* an option the integration cannot honour is refused when it is built (Scaler's in
  test_scaler.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_CHILD = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
import freight
try:
    {call}
except freight.MissingDependencyError as exc:
    assert isinstance(exc, ImportError) and isinstance(exc, freight.FreightError)
    assert isinstance(exc.__cause__, ImportError), exc.__cause__
    print("MISSING:", exc)
else:
    print("NO ERROR")
"""

CASES = {
    "dask install": (["distributed"], "import freight.integrations.dask as m; m.install(object())", "dask"),
    "dask install_local": (["distributed"], "import freight.integrations.dask as m; m.install_local()", "dask"),
    "ray install": (["ray"], "import freight.integrations.ray as m; m.install()", "ray"),
    "ray uninstall": (["ray"], "import freight.integrations.ray as m; m.uninstall()", "ray"),
    "joblib install": (["joblib"], "import freight.integrations.joblib as m; m.install()", "joblib"),
    "celery import": (["celery", "kombu"], "import freight.integrations.celery", "celery"),
    "parsl import": (["parsl"], "import freight.integrations.parsl", "parsl"),
    "mpi4py import": (["mpi4py"], "import freight.integrations.mpi4py", "mpi4py"),
    "proxystore freight_store": (
        ["proxystore"],
        "from freight.integrations.proxystore import freight_store; freight_store('s', None)",
        "proxystore",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_integration_without_its_library_names_the_extra(case):
    blocked, call, extra = CASES[case]
    code = textwrap.dedent(_CHILD).format(blocked=blocked, call=call)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("MISSING: "), proc.stdout
    assert f"pip install 'freight[{extra}]'" in proc.stdout, proc.stdout


# Calls each integration's entry point with a misspelled option and prints the error.
_TYPO = """
import freight
try:
    {call}
except freight.OptionError as exc:
    print("OPTION:", exc)
else:
    print("NO ERROR")
"""

TYPOS = {
    "dask install": ("import freight.integrations.dask as m; m.install(object(), compresion='lz4')",
                     "freight.integrations.dask.install", "compresion", "compression"),
    "dask install_local": ("import freight.integrations.dask as m; m.install_local({'compresion': 'lz4'})",
                           "freight.integrations.dask.install_local", "compresion", "compression"),
    "ray install": ("import freight.integrations.ray as m; m.install(compresion='lz4')",
                    "freight.integrations.ray.install", "compresion", "compression"),
    "ray runtime_env": ("import freight.integrations.ray as m; m.runtime_env(compresion='lz4')",
                        "freight.integrations.ray.runtime_env", "compresion", "compression"),
    "joblib install": ("import freight.integrations.joblib as m; m.install(treshold=1)",
                       "freight.integrations.joblib.install", "treshold", "threshold"),
    "multiprocessing install": ("import freight.integrations.multiprocessing as m; m.install(treshold=1)",
                                "freight.integrations.multiprocessing.install", "treshold", "threshold"),
    "parsl install": ("import freight.integrations.parsl as m; m.install(large_value=1)",
                      "freight.integrations.parsl.install", "large_value", "large_values"),
    "parsl FreightSerializer": ("import freight.integrations.parsl as m; m.FreightSerializer(compresion='lz4')",
                                "FreightSerializer", "compresion", "compression"),
    "celery install": ("import freight.integrations.celery as m; m.install(object(), alow_pickle=True)",
                       "freight.integrations.celery.install", "alow_pickle", "allow_pickle"),
    "mpi4py install": ("import freight.integrations.mpi4py as m; m.install(zero_cpy=True)",
                       "freight.integrations.mpi4py.install", "zero_cpy", "zero_copy"),
    "proxystore freight_store": (
        "from freight.integrations.proxystore import freight_store; freight_store('s', None, compresion='lz4')",
        "freight_store", "compresion", "compression"),
    "scaler FreightSerializer": ("from freight.integrations.scaler import FreightSerializer as S; S(compresion='lz4')",
                                 "FreightSerializer", "compresion", "compression"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TYPOS))
def test_a_misspelled_option_names_the_integrations_function(case):
    call, public, given, meant = TYPOS[case]
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TYPO).format(call=call)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = f"OPTION: {public}() got an unexpected keyword argument {given!r}; did you mean {meant!r}?"
    assert proc.stdout.strip() == expected


def test_parsl_install_refuses_a_key_its_workers_cannot_honour():
    """Parsl makes each worker's serializer by name, without options: a key given to install()
    would sign the submitter's payloads only, and the submitter would refuse every result."""
    call = "import freight.integrations.parsl as m; m.install(key=b'secret')"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TYPO).format(call=call)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("OPTION: freight.integrations.parsl.install() cannot take key: "), proc.stdout
    assert "refuse every result" in proc.stdout


# An option value of the wrong kind: an OptionError naming the option, before anything is
# installed; never a truth value read from "false", never a bare TypeError.
KINDS = {
    "multiprocessing allow_pickle": (
        "import freight.integrations.multiprocessing as m; m.install(allow_pickle='false')",
        "allow_pickle= takes True or False; got 'false'"),
    "multiprocessing threshold str": ("import freight.integrations.multiprocessing as m; m.install(threshold='5')",
                                      "threshold= takes a positive number of bytes (an int) or None; got '5'"),
    "multiprocessing threshold bool": ("import freight.integrations.multiprocessing as m; m.install(threshold=True)",
                                       "threshold= takes a positive number of bytes (an int) or None; got True"),
    "joblib threshold": ("import freight.integrations.joblib as m; m.install(threshold=True)",
                         "threshold= takes a positive number of bytes (an int) or None; got True"),
    "mpi4py zero_copy": ("import freight.integrations.mpi4py as m; m.install(zero_copy='no')",
                         "zero_copy= takes True or False; got 'no'"),
    "parsl reply_in_kind": ("import freight.integrations.parsl as m; m.install(reply_in_kind='no')",
                            "reply_in_kind= takes True or False; got 'no'"),
    "celery allow_pickle": ("import freight.integrations.celery as m; m.install(object(), allow_pickle='no')",
                            "allow_pickle= takes True or False; got 'no'"),
    "dask install min_bytes": ("import freight.integrations.dask as m; m.install(object(), min_bytes=True)",
                               "min_bytes= takes a number of bytes (an int of at least 0); got True"),
    "dask install_local min_bytes": ("import freight.integrations.dask as m; m.install_local(min_bytes='5')",
                                     "min_bytes= takes a number of bytes (an int of at least 0); got '5'"),
    "proxystore configure allow_pickle": (
        "import freight.integrations.proxystore as m; m.configure('s', allow_pickle='false')",
        "allow_pickle= takes True or False; got 'false'"),
    "proxystore configure key": ("import freight.integrations.proxystore as m; m.configure('s', key=5)",
                                 "a freight key is bytes, str or a non-empty list of them, not int"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(KINDS))
def test_an_option_of_the_wrong_kind_is_an_option_error(case):
    call, words = KINDS[case]
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TYPO).format(call=call)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == f"OPTION: {words}"


def test_a_refused_multiprocessing_install_installs_nothing():
    import freight
    import freight.integrations.multiprocessing as fmp

    assert not fmp.installed()
    with pytest.raises(freight.OptionError):
        fmp.install(allow_pickle="false")
    assert not fmp.installed()


def test_celery_allow_pickle_none_is_celerys_default_not_the_codecs():
    call = """
    import celery
    import freight.integrations.celery as m
    m.install(celery.Celery("t", broker="memory://"), allow_pickle=None)
    print(m.installed()["allow_pickle"], m._STATE["codec"].options.allow_pickle)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(call)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "False"]
