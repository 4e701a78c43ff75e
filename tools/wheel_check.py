"""Checks a release wheel the way a user meets it: installed into fresh virtualenvs from PyPI.

    python tools/wheel_check.py [--wheel dist/freight-...whl] [--keep DIR]

Run by `make wheel-check` (and so by CI) with the development virtualenv's Python, which wrote
the DataFrame payload below and whose installed packages resolve the heavy extras. Checks:

1. The wheel holds the package, its stubs and the benchmark (`freight bench`, whose plotting
   comes with the `bench` extra), and leaves out the stubtest allowlist.
2. In a fresh virtualenv with no extras: `import freight` takes under 50 ms (the median CPU
   time of 9 fresh interpreters; wall time printed too), dumps/loads of builtins round-trip,
   loading a payload that holds a DataFrame raises MissingDependencyError naming
   `freight[pandas]`, as does `freight demo`, and `freight bench --list` lists the workloads
   with the peers that are not installed marked so.
3. Each extra installs what its modules import (see `owner`, below): the light extras are
   installed for real, each into its own virtualenv, and their modules imported; the heavy
   ones (HEAVY: gigabytes of wheels) are checked without installing them: each third-party
   import of their modules must be provided by the extra's requirements (read from the wheel),
   followed through the metadata of the packages installed here.

Nothing is mocked; pip's cache keeps repeated runs to a few minutes. Exit status 1 names each
failure.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

IMPORT_BUDGET_S = 0.050
IMPORT_RUNS = 9
INSTALL_JOBS = 3

# Extras whose libraries weigh gigabytes (torch, tensorflow with their CUDA or runtime wheels,
# Ray): their imports are checked against metadata instead of a real install.
HEAVY = {"torch", "tensorflow", "ray"}
# Extras that are compositions of the others, not checked on their own.
COMPOSITE = {"all", "test"}
# Extras for working on freight rather than using it (the documentation site): no module of the
# wheel needs them, and `all` leaves them out.
DEVELOPMENT = {"docs"}

# Which extra installs the third-party libraries a module imports, by module-name prefix (the
# longest prefix wins). `freight.integrations.X` belongs to extra X by name (see `owner`).
OWNERS = {
    "freight.serializers.numpy": "numpy",  # numpy, numpy_masked
    "freight.serializers.pandas": "pandas",  # pandas and its block and column modules
    "freight.serializers.scipy_sparse": "scipy",
    "freight.serializers.arrow": "arrow",  # arrow, arrow_python
    "freight.serializers.polars": "polars",
    "freight.serializers.xarray": "xarray",
    "freight.serializers.torch": "torch",
    "freight.serializers.tensorflow": "tensorflow",
    "freight.storage.zarr_store": "zarr",
    "freight.storage.progress": "progress",
    "freight.storage.functionfuse": "s3fs",
    "freight.demo": "pandas",  # `freight demo` builds arrays and DataFrames
    # `freight bench`: matplotlib for the plots, tqdm for the bar, numpy for most workloads; the
    # peers and the data libraries are measured when installed (OPTIONAL below).
    "freight.bench": "bench",
    # The programs `freight bench --engines` runs as child processes need their engine.
    "freight.bench.engines._celery_app": "celery",
    "freight.bench.engines._mpi_program": "mpi4py",
}
# Imports of owned modules (by prefix) that only values of another library reach (a pandas column
# backed by Arrow comes with pyarrow installed): not required of the module's extra.
OPTIONAL = {
    "freight.serializers.pandas": {"pyarrow"},
    # The benchmark imports each peer and data library inside the function that uses it, and
    # skips (and reports) those that are missing.
    "freight.bench": set(
        "blosc2 celery cloudpickle dill distributed joblib lz4 mpi4py msgspec pandas parsl polars proxystore pyarrow"
        " pyfory ray redis safetensors scaler torch zstandard".split()
    ),
}
# A requirement this virtualenv holds under another name: the test extra installs tensorflow-cpu,
# which provides the same `tensorflow` module as the tensorflow extra's `tensorflow`.
STAND_INS = {"tensorflow": "tensorflow-cpu"}

# What a user's program does with no extra installed; run by the fresh interpreter (stdlib only
# until it imports freight).
BASE_PROBE = r"""
import datetime, decimal, json, pathlib, sys, uuid
import freight
value = {
    "none": None, "bools": [True, False], "int": -(2**70), "float": 1.5, "complex": 2 - 1j,
    "str": "fret \u00e9", "bytes": b"\x00\xff" * 40_000, "bytearray": bytearray(b"ab"),
    "tuple": (1, (2, 3)), "set": {1, 2}, "frozenset": frozenset({"a"}),
    "when": datetime.datetime(2026, 11, 27, 14, 0, tzinfo=datetime.timezone.utc),
    "decimal": decimal.Decimal("1.10"), "uuid": uuid.UUID(int=7), "path": pathlib.PurePosixPath("/a/b"),
}
value["self"] = [value["tuple"], value["tuple"]]
out = {"roundtrip": freight.loads(freight.dumps(value)) == value}
out["frames"] = freight.loads_frames(freight.dumps_frames(value)) == value
again = freight.loads(freight.dumps(value["self"]))
out["aliasing"] = again[0] is again[1]
try:
    freight.loads(open(sys.argv[1], "rb").read())
    out["dataframe"] = "loaded without pandas"
except freight.MissingDependencyError as exc:
    out["dataframe"] = str(exc)
except Exception as exc:
    out["dataframe"] = f"{type(exc).__name__}: {exc}"
out["pandas_absent"] = "pandas" not in sys.modules
print(json.dumps(out))
"""

# CPU time and wall time of `import freight`, in seconds.
IMPORT_TIMER = (
    "import time; c, t = time.process_time(), time.perf_counter(); import freight; "
    "print(time.process_time() - c, time.perf_counter() - t)"
)

# Imports each module given and checks that each library name given can be found; prints JSON.
EXTRA_PROBE = r"""
import importlib, importlib.util, json, sys, traceback
modules, names = json.loads(sys.argv[1])
out = {}
for module in modules:
    try:
        importlib.import_module(module)
        out[module] = None
    except BaseException:
        out[module] = traceback.format_exc(limit=2).strip().splitlines()[-1]
for name in names:
    try:  # a module already imported (kombu, through celery) may have no __spec__
        found = name in sys.modules or importlib.util.find_spec(name) is not None
    except ValueError:
        found = False
    out[name] = None if found else "not installed"
print(json.dumps(out))
"""


class Failures(list[str]):
    """The failed checks; each check prints a line as it is made."""

    def check(self, ok: bool, what: str) -> bool:
        print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
        if not ok:
            self.append(what)
        return ok

    def step(self, error: str, what: str) -> bool:
        """A step the checks after it need (an install, a child process): printed if it failed."""
        return self.check(False, f"{what}: {error}") if error else True


# -- the wheel -------------------------------------------------------------------------------------


def find_wheel(folder: Path) -> Path:
    """The wheel in ``folder`` built for this interpreter (cp311-cp311 for CPython 3.11)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(folder.glob(f"freight-*-{tag}-*.whl"))
    if not wheels:
        raise SystemExit(f"no freight wheel for {tag} in {folder}: run `make wheel` first")
    return wheels[-1]


def wheel_sources(wheel: Path) -> dict[str, str]:
    """Module name -> source, for every Python module the wheel installs."""
    out = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("freight/") and name.endswith(".py"):
                module = name[:-3].replace("/", ".").removesuffix(".__init__")
                out[module] = zf.read(name).decode()
    return out


def wheel_extras(wheel: Path) -> dict[str, list[str]]:
    """Extra -> its Requires-Dist lines (markers dropped), from the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        (metadata,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(metadata).decode()
    extras: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("Provides-Extra: "):
            extras.setdefault(line.split(": ", 1)[1].strip(), [])
        elif line.startswith("Requires-Dist: "):
            requirement, _, marker = line.split(": ", 1)[1].partition(";")
            match = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
            if match:
                extras.setdefault(match.group(1), []).append(requirement.strip())
    return extras


def check_contents(wheel: Path, failures: Failures) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    print(f"contents of {wheel.name} ({wheel.stat().st_size / 2**20:.1f} MiB, {len(names)} files):")
    failures.check("manylinux" in wheel.name, "the wheel is tagged manylinux (installs on older Linux too)")
    failures.check(any(re.match(r"freight/_freight\..*\.so$", n) for n in names), "holds the extension")
    for needed in ("freight/__init__.py", "freight/_freight.pyi", "freight/py.typed"):
        failures.check(needed in names, f"holds {needed}")
    failures.check("freight/bench/__init__.py" in names, "holds the benchmark (freight/bench, run by `freight bench`)")
    failures.check(not any("allowlist" in n for n in names), "leaves out the stubtest allowlist")


# -- imports of the package's modules -----------------------------------------------------------------


def third_party_imports(source: str) -> tuple[set[str], set[str]]:
    """The top-level names of the non-stdlib modules a module imports: (at import time, inside
    functions). Imports under ``if TYPE_CHECKING:`` are left out (they never run)."""
    at_import: set[str] = set()
    in_functions: set[str] = set()
    stdlib = set(sys.stdlib_module_names) | {"__future__", "freight"}

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.orelse:
                    visit(sub, in_function)
                continue
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            else:
                names = []
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib:
                    (in_functions if in_function else at_import).add(top)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), False)
    return at_import, in_functions


def owner(module: str, extras: set[str]) -> str | None:
    """The extra that installs what ``module`` imports, or None (freight's own dependencies)."""
    parts = module.split(".")
    if parts[:2] == ["freight", "integrations"] and len(parts) == 3 and parts[2] in extras:
        return parts[2]
    prefixes = [p for p in OWNERS if module == p or module.startswith(p)]
    return OWNERS[max(prefixes, key=len)] if prefixes else None


def required_imports(sources: dict[str, str], extras: set[str], failures: Failures) -> dict[str, dict[str, set[str]]]:
    """Extra -> {module: the libraries it needs}. A module no extra owns may import only
    freight's own dependencies when it is imported (other libraries only inside functions, for
    values of that library)."""
    core = {"cloudpickle"}
    by_extra: dict[str, dict[str, set[str]]] = {}
    print("imports of the wheel's modules:")
    for module, source in sorted(sources.items()):
        at_import, in_functions = third_party_imports(source)
        extra = owner(module, extras)
        if extra is None:
            stray = sorted(at_import - core)
            if stray:
                failures.check(False, f"{module} imports {stray} when imported, but no extra owns it (OWNERS)")
            continue
        optional = set().union(*(names for prefix, names in OPTIONAL.items() if module.startswith(prefix)))
        needed = (at_import | in_functions) - optional
        by_extra.setdefault(extra, {})[module] = needed
    for extra in sorted(extras - COMPOSITE - DEVELOPMENT):
        failures.check(extra in by_extra, f"extra {extra!r} installs what a module of the wheel imports (OWNERS)")
    return by_extra


def check_registry_extras(
    sources: dict[str, str], extras: set[str], by_extra: dict[str, dict[str, set[str]]], failures: Failures
) -> None:
    """A payload whose library is missing raises MissingDependencyError naming the extra that
    registry._LIBRARIES gives: it must be the extra that owns the serializer module."""
    tree = ast.parse(sources["freight.registry"])
    (table,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_LIBRARIES" and node.value
    ]
    for top, (module, extra) in sorted(ast.literal_eval(table).items()):
        owned = [e for e, modules in by_extra.items() if module in modules]
        if owned:
            failures.check(owned == [extra], f"a missing {top} names freight[{extra}], the extra that owns {module}")
        else:
            failures.check(extra in extras, f"a missing {top} names freight[{extra}], an extra that exists")


# -- virtualenvs -----------------------------------------------------------------------------------


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, **kwargs)


def failed(result: subprocess.CompletedProcess[str], tail: int) -> str:
    """ "" when the process succeeded, else the end of what it printed on stderr."""
    return "" if result.returncode == 0 else (result.stderr.strip()[-tail:] or f"exit status {result.returncode}")


def make_venv(path: Path, requirement: str) -> tuple[Path, str]:
    """A fresh virtualenv at ``path`` with ``requirement`` installed by this interpreter's pip
    (``pip --python``: no pip inside each virtualenv). Returns (python, pip's error or "")."""
    run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    pip = run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-input", requirement])
    return python, failed(pip, 2000)


def check_base(wheel: Path, work: Path, failures: Failures) -> None:
    print("a fresh virtualenv with the wheel and no extra:")
    python, error = make_venv(work / "base", str(wheel))
    if not failures.step(error, "the wheel installs"):
        return
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}

    def fresh(*args: str) -> subprocess.CompletedProcess[str]:
        return run([str(python), "-I", *args], cwd=work, env=clean_env)

    fresh("-c", "import freight")  # the first start reads the files into the page cache
    cpu, wall = [], []
    for _ in range(IMPORT_RUNS):
        result = fresh("-c", IMPORT_TIMER)
        if not failures.step(failed(result, 500), "import freight"):
            return
        cpu_s, wall_s = (float(x) for x in result.stdout.split())
        cpu.append(cpu_s)
        wall.append(wall_s)
    # The budget is on the import's own cost, its CPU time: the wall time adds whatever else the
    # machine runs meanwhile (the same imports took 90 ms of wall time and 30 ms of CPU time with
    # ten other processes per core). Both are printed.
    failures.check(
        statistics.median(cpu) < IMPORT_BUDGET_S,
        f"import freight: median {statistics.median(cpu) * 1e3:.1f} ms of CPU time over {IMPORT_RUNS} fresh "
        f"interpreters (budget {IMPORT_BUDGET_S * 1e3:.0f} ms; wall time median {statistics.median(wall) * 1e3:.1f} "
        f"ms, min {min(wall) * 1e3:.1f} ms)",
    )

    import pandas as pd

    import freight

    payload = work / "frame.frt"
    payload.write_bytes(freight.dumps(pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})))
    result = fresh("-c", BASE_PROBE, str(payload))
    if not failures.step(failed(result, 1000), "the probe runs"):
        return
    out = json.loads(result.stdout)
    failures.check(out["roundtrip"] and out["frames"], "dumps/loads and dumps_frames/loads_frames round-trip builtins")
    failures.check(out["aliasing"], "a value held twice comes back as one object")
    failures.check(out["pandas_absent"], "pandas is not installed there")
    message = out["dataframe"]
    failures.check(
        "freight[pandas]" in message and not message.startswith(("loaded", "Exception", "DeserializationError")),
        f"a DataFrame payload raises MissingDependencyError naming freight[pandas]: {message}",
    )
    demo = run([str(python.parent / "freight"), "demo", "--store", str(work / "demo")], cwd=work, env=clean_env)
    failures.check(
        demo.returncode == 1 and "freight[pandas]" in demo.stderr,
        f"`freight demo` without pandas names freight[pandas] (exit {demo.returncode}): {demo.stderr.strip()[:300]}",
    )
    bench = run([str(python.parent / "freight"), "bench", "--list"], cwd=work, env=clean_env)
    failures.check(
        bench.returncode == 0 and "numpy-float64" in bench.stdout and "(not installed)" in bench.stdout,
        f"`freight bench --list` from the wheel lists the workloads, peers not installed marked so "
        f"(exit {bench.returncode}): {(bench.stderr or bench.stdout).strip()[:300]}",
    )


def installed_extra(wheel: Path, work: Path, extra: str, modules: dict[str, set[str]]) -> tuple[bool, str]:
    """Installs ``freight[extra]`` into its own virtualenv, imports its modules there and looks
    for each library they import. Returns (passed, the line that says so); run in a thread."""
    started = time.perf_counter()
    python, error = make_venv(work / extra, f"{wheel}[{extra}]")
    if error:
        return False, f"freight[{extra}] installs: {error}"
    names = sorted(set().union(*modules.values()))
    result = run([str(python), "-I", "-c", EXTRA_PROBE, json.dumps([sorted(modules), names])], cwd=work)
    if result.returncode:
        return False, f"freight[{extra}]: the probe runs: {failed(result, 500)}"
    bad = {k: v for k, v in json.loads(result.stdout).items() if v}
    return not bad, (
        f"freight[{extra}] ({time.perf_counter() - started:.0f} s): imports {', '.join(sorted(modules))}"
        + (f"; missing: {bad}" if bad else f" (needs {', '.join(names) or 'nothing more'})")
    )


def check_extra_metadata(extra: str, requirements: list[str], modules: dict[str, set[str]], failures: Failures):
    """Without installing: the libraries the modules import are among the top-level modules of
    the extra's requirements and of what they require in turn, read from the metadata of the
    distributions installed in this virtualenv."""
    provided, unresolved = provided_modules(requirements)
    names = set().union(*modules.values())
    missing = sorted(names - provided)
    failures.check(
        not missing and not unresolved,
        f"freight[{extra}] (metadata): provides {', '.join(sorted(names))} for {', '.join(sorted(modules))}"
        + (f"; missing: {missing}" if missing else "")
        + (f"; not installed here to resolve: {unresolved}" if unresolved else ""),
    )


def provided_modules(requirements: list[str]) -> tuple[set[str], list[str]]:
    import importlib.metadata as md

    from packaging.requirements import Requirement

    modules_of: dict[str, set[str]] = {}
    for module, dists in md.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(normal(dist), set()).add(module)
    provided: set[str] = set()
    unresolved: list[str] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = normal(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            stand_in = STAND_INS.get(name)
            if stand_in is None:
                unresolved.append(req.name)
                continue
            dist, name = md.distribution(stand_in), normal(stand_in)
        provided |= modules_of.get(name, set())
        for line in dist.requires or []:
            sub = Requirement(line)
            envs = [{"extra": e} for e in req.extras] or [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in envs):
                todo.append(sub)
    return provided, unresolved


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def expand(extras: dict[str, list[str]], extra: str) -> list[str]:
    """An extra's requirements with `freight[...]` (other extras) replaced by theirs."""
    out = []
    for requirement in extras[extra]:
        match = re.match(r"^freight\s*\[([^\]]+)\]", requirement)
        if match:
            for other in match.group(1).split(","):
                out += expand(extras, other.strip())
        else:
            out.append(requirement)
    return out


# -- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="the wheel (default: this interpreter's in dist/)")
    parser.add_argument("--keep", type=Path, help="build the virtualenvs here and keep them")
    parser.add_argument("--only", help="check only these extras (comma-separated), for a quick look")
    args = parser.parse_args(argv)
    wheel = (args.wheel or find_wheel(ROOT / "dist")).resolve()
    failures = Failures()
    started = time.perf_counter()
    print(f"wheel check: {wheel} (Python {sysconfig.get_python_version()})")

    check_contents(wheel, failures)
    extras_of = wheel_extras(wheel)
    extras = set(extras_of)
    sources = wheel_sources(wheel)
    by_extra = required_imports(sources, extras, failures)
    check_registry_extras(sources, extras, by_extra, failures)
    failures.check(
        set(expand(extras_of, "all")) >= {r for e in extras - COMPOSITE - DEVELOPMENT for r in expand(extras_of, e)},
        "freight[all] installs every extra",
    )

    with _workdir(args.keep) as work:
        check_base(wheel, work, failures)
        chosen = sorted(set(args.only.split(",")) & set(by_extra) if args.only else by_extra)
        for extra in [e for e in chosen if e in HEAVY]:
            check_extra_metadata(extra, expand(extras_of, extra), by_extra[extra], failures)
        # The installs wait mostly on PyPI's index and on unpacking: a few at a time.
        light = [e for e in chosen if e not in HEAVY]
        with concurrent.futures.ThreadPoolExecutor(INSTALL_JOBS) as pool:
            for ok, line in pool.map(lambda e: installed_extra(wheel, work, e, by_extra[e]), light):
                failures.check(ok, line)
        took = time.perf_counter() - started
        if failures:
            print(f"wheel check FAILED ({len(failures)}, {took:.0f} s):\n  " + "\n  ".join(failures), flush=True)
        else:
            print(f"wheel check passed ({took:.0f} s; removing the virtualenvs)", flush=True)
    return 1 if failures else 0


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    """Where the virtualenvs go: ``keep`` (left in place), else a temporary folder."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="freight-wheel-check-") as tmp:
        yield Path(tmp)


if __name__ == "__main__":
    sys.exit(main())
