"""The seams between the extension's Rust and freight's Python, checked (issue 32; `make lint`).

Rust (crates/freight-py/src) reaches into Python by name: it reads and calls attributes
(``obj.getattr(intern!(py, "safe"))``, ``call_method1("by_tag", ...)``) and imports modules when it
first needs them (``py.import("freight._versions")``, ``import_exception!(freight.exceptions, ...)``).
Neither the compiler nor import-linter sees these names, so renaming a private attribute in Python,
or a new import from Rust that goes back up freight's layers, breaks ``dumps`` at run time and not
at lint time. This checker reads the Rust sources and fails when:

- Rust reads or calls an underscore attribute (dunders excepted) that tools/rust_seams.toml does not
  list under ``[private]``, or a listed one is no longer defined where the entry says it lives;
- Rust imports a module that tools/rust_seams.toml does not list under ``[imports]``; a listed
  ``freight.*`` module does not exist, is named by no layer of the ``[tool.importlinter]`` contracts
  in pyproject.toml, or is not below the Python modules the entry says reach it through the
  extension;
- Rust reaches an attribute or a module by a name it computes (``getattr(name)``) outside the
  helpers listed under ``[[forwarders]]``, whose callers' literal names are then checked instead;
- an entry of the file matches nothing any more (it would outlive the code it describes).

Standard library only (tomllib: Python 3.11 and newer). ``--root`` checks another tree (the tests
use a copy). Exit status 0 when clean, 1 with one line per finding (file:line first) otherwise.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    sys.exit("tools/check_rust_seams.py needs Python 3.11 or newer (tomllib)")

RUST_SRC = Path("crates/freight-py/src")
ALLOWLIST = Path("tools/rust_seams.toml")
PYPROJECT = Path("pyproject.toml")
PACKAGE = Path("python/freight")
EXTENSION = "freight._freight"

# Methods of PyO3's Bound<PyAny> whose first argument is an attribute's name.
ATTRIBUTE_METHODS = ("getattr", "getattr_opt", "hasattr", "setattr", "delattr")
CALL_METHODS = ("call_method", "call_method0", "call_method1")
ATTRIBUTE_CALL = re.compile(r"\.\s*(" + "|".join(ATTRIBUTE_METHODS + CALL_METHODS) + r")\s*\(")
INTERN = re.compile(r"\bintern!\s*\(")
# py.import("m"), PyModule::import(py, "m"), a PyOnceLock's .import(py, "m", "attr"), *_bound.
IMPORT_CALL = re.compile(r"(?:\.\s*|\bPyModule\s*::\s*)(import|import_bound)\s*\(")
IMPORT_EXCEPTION = re.compile(r"\bimport_exception(?:_bound)?!\s*\(")
FN = re.compile(r"\bfn\s+([A-Za-z_]\w*)")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# --- Rust sources: comments and literals -----------------------------------------------------------


@dataclass
class RustFile:
    """One Rust file: its text with comments blanked and each string literal's content blanked
    (offsets and lines unchanged, so braces and commas in code can be matched), and the literals."""

    path: Path
    shown: str  # the path as findings print it
    code: str = ""
    literals: dict[int, tuple[int, str]] = field(default_factory=dict)  # start -> (end, value)
    line_starts: list[int] = field(default_factory=list)
    functions: list[tuple[int, int, str]] = field(default_factory=list)  # body start, end, name

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def function_at(self, offset: int) -> str | None:
        """The innermost `fn` whose body holds `offset` (closures count as their function's)."""
        inside = [(start, name) for start, end, name in self.functions if start <= offset < end]
        return max(inside)[1] if inside else None


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _unescape(raw: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw)


def read_rust(path: Path, shown: str) -> RustFile:
    text = path.read_text(encoding="utf-8")
    out = list(text)
    literals: dict[int, tuple[int, str]] = {}
    n, i = len(text), 0

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(text, i)) and (i == 0 or not _ident(text[i - 1])):
            close = '"' + m.group(1)
            end = text.find(close, m.end())
            end = n if end < 0 else end + len(close)
            literals[i] = (end, text[m.end() : end - len(close)])
            blank(i, end)
            out[i], out[end - 1] = '"', '"'
            i = end
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not _ident(text[i - 1]))):
            start, j = i, i + (1 if c == '"' else 2)
            body = j
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            literals[start] = (end, _unescape(text[body:j]))
            blank(start, end)
            out[start], out[end - 1] = '"', '"'
            i = end
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '{') or a lifetime / label ('py, 'outer).
            if text.startswith("\\", i + 1):
                end = text.find("'", i + 3) + 1
            elif i + 2 < n and text[i + 2] == "'":
                end = i + 3
            else:
                end = 0
            if end > i:
                blank(i, end)
                i = end
            else:
                i += 1
        else:
            i += 1
    rust = RustFile(path=path, shown=shown, code="".join(out), literals=literals)
    rust.line_starts = [0] + [k + 1 for k, ch in enumerate(text) if ch == "\n"]
    rust.functions = _functions(rust.code)
    return rust


def _ident(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _matching(code: str, open_at: int) -> int:
    """The offset just past the bracket that closes the one at `open_at`."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[code[open_at]]]
    for k in range(open_at + 1, len(code)):
        ch = code[k]
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if stack and stack[-1] == ch:
                stack.pop()
            if not stack:
                return k + 1
    return len(code)


def _functions(code: str) -> list[tuple[int, int, str]]:
    spans = []
    for m in FN.finditer(code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or 0 <= semi < brace:  # a declaration without a body (traits, extern)
            continue
        spans.append((brace, _matching(code, brace), m.group(1)))
    return spans


def call_arguments(rust: RustFile, open_paren: int) -> list[tuple[int, int]]:
    """The (start, end) spans of a call's top-level arguments, whitespace trimmed."""
    code, close = rust.code, _matching(rust.code, open_paren) - 1
    args, start, depth = [], open_paren + 1, 0
    for k in range(open_paren + 1, close + 1):
        ch = code[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and k < close:
            depth -= 1
        elif (ch == "," and depth == 0) or k == close:
            a, b = start, k
            while a < b and code[a].isspace():
                a += 1
            while b > a and code[b - 1].isspace():
                b -= 1
            if b > a:
                args.append((a, b))
            start = k + 1
    return args


def literal_value(rust: RustFile, span: tuple[int, int]) -> tuple[int, str] | None:
    """The string an argument names, with its offset: a literal, `&"lit"` or `intern!(py, "lit")`."""
    a, b = span
    code = rust.code
    while a < b and code[a] in "&":
        a += 1
    if a in rust.literals and rust.literals[a][0] == b:
        return a, rust.literals[a][1]
    m = re.compile(r"(?:[\w:]*::)?intern!\s*\(").match(code, a)
    if m and _matching(code, m.end() - 1) == b:
        args = call_arguments(rust, m.end() - 1)
        if len(args) == 2:
            return literal_value(rust, args[1])
    return None


# --- what the Rust sources reach ---------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    file: str
    line: int
    name: str
    via: str  # what the line does, for findings: getattr, call_method1, import, ...


@dataclass
class Seams:
    attributes: dict[tuple[str, int], Site] = field(default_factory=dict)  # by (file, offset)
    imports: list[Site] = field(default_factory=list)
    dynamic: list[tuple[Site, str, str | None]] = field(default_factory=list)  # site, kind, fn


def scan(rust: RustFile, seams: Seams) -> None:
    code = rust.code

    def attribute(offset: int, name: str, via: str) -> None:
        seams.attributes.setdefault((rust.shown, offset), Site(rust.shown, rust.line(offset), name, via))

    def dynamic(span: tuple[int, int], kind: str, via: str) -> None:
        text = " ".join(code[span[0] : span[1]].split())
        seams.dynamic.append((Site(rust.shown, rust.line(span[0]), text, via), kind, rust.function_at(span[0])))

    for m in ATTRIBUTE_CALL.finditer(code):
        args = call_arguments(rust, m.end() - 1)
        if not args:
            continue
        found = literal_value(rust, args[0])
        if found:
            attribute(found[0], found[1], m.group(1))
        else:
            dynamic(args[0], "attribute", m.group(1))
    for m in INTERN.finditer(code):
        args = call_arguments(rust, m.end() - 1)
        found = literal_value(rust, args[1]) if len(args) == 2 else None
        if found and is_private(found[1]):  # an interned underscore name is one Rust looks up
            attribute(found[0], found[1], "intern!")
    for m in IMPORT_CALL.finditer(code):
        args = call_arguments(rust, m.end() - 1)
        values = [literal_value(rust, a) for a in args]
        if values and values[0]:
            module = values[0]
        elif len(values) >= 2 and values[1]:  # (py, "module"[, "attribute"])
            module = values[1]
            if len(values) >= 3 and values[2]:
                attribute(values[2][0], values[2][1], m.group(1))
        else:
            dynamic(args[-1] if args else (m.end(), m.end()), "import", m.group(1))
            continue
        seams.imports.append(Site(rust.shown, rust.line(module[0]), module[1], m.group(1)))
    for m in IMPORT_EXCEPTION.finditer(code):
        args = call_arguments(rust, m.end() - 1)
        if args:
            module = re.sub(r"\s+", "", code[args[0][0] : args[0][1]])
            seams.imports.append(Site(rust.shown, rust.line(args[0][0]), module, "import_exception!"))


def scan_forwarded(rust: RustFile, call: str, argument: int, kind: str, seams: Seams, errors: list[str]) -> int:
    """Call sites of a listed helper that takes a name: the name it is given there. Returns how many."""
    count = 0
    for m in re.finditer(r"(?<![\w.])" + re.escape(call) + r"\s*\(", rust.code):
        if re.search(r"\bfn\s+$", rust.code[max(0, m.start() - 8) : m.start()]):
            continue
        count += 1
        args = call_arguments(rust, m.end() - 1)
        found = literal_value(rust, args[argument]) if argument < len(args) else None
        if found is None:
            errors.append(
                f"{rust.shown}:{rust.line(m.start())}: {call}(...) is given a {kind} name that is not a "
                f"literal; the checker cannot see it: pass a literal, or list this function under "
                f"[[forwarders]] in {ALLOWLIST}"
            )
        elif kind == "import":
            seams.imports.append(Site(rust.shown, rust.line(found[0]), found[1], call))
        else:
            seams.attributes.setdefault((rust.shown, found[0]), Site(rust.shown, rust.line(found[0]), found[1], call))
    return count


# --- Python side: definitions and the import contracts ---------------------------------------------


def module_file(root: Path, module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "freight":
        return None
    base = root / PACKAGE / Path(*parts[1:]) if len(parts) > 1 else root / PACKAGE
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def defined_names(tree: ast.AST, class_name: str | None) -> set[str] | None:
    """Names a module defines at its top level, or that a class defines (methods, class attributes,
    `self.x = ...` in its methods); None when the class is not there."""
    body: list[ast.stmt]
    if class_name is None:
        body = tree.body  # type: ignore[attr-defined]
    else:
        found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not found:
            return None
        body = found[0].body
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if class_name is not None:
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, (ast.Attribute)) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return names


def imports_extension(path: Path, module: str) -> bool:
    """Whether a module of freight imports freight._freight (anywhere, as import-linter counts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == EXTENSION for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base == EXTENSION or (base == "freight" and any(a.name == "_freight" for a in node.names)):
                return True
    return False


def extension_importers(root: Path) -> list[str]:
    found = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root / PACKAGE.parent).with_suffix("")
        parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
        module = ".".join(parts)
        if module != "freight" and imports_extension(path, module):
            found.append(module)
    return found


def layer_contracts(pyproject: dict) -> dict[str, list[set[str]]]:
    """Each `layers` contract's container and its layers, top first, as sets of names."""
    contracts: dict[str, list[set[str]]] = {}
    for contract in pyproject.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") != "layers":
            continue
        layers = [{name.strip() for name in re.split(r"[|:]", layer)} for layer in contract["layers"]]
        for container in contract.get("containers", []):
            contracts[container] = layers
    return contracts


def layer_path(contracts: dict[str, list[set[str]]], module: str) -> list[tuple[str, int]] | None:
    """The layer index of `module` and of each package above it, in each container's contract from
    the root down (e.g. freight.serializers.numpy: serializers in freight's, numpy in
    freight.serializers'); None when a container's contract names no layer for it."""
    parts = module.split(".")
    path = []
    for depth in range(1, len(parts)):
        container = ".".join(parts[:depth])
        if container not in contracts:
            break
        index = next((k for k, layer in enumerate(contracts[container]) if parts[depth] in layer), None)
        if index is None:
            return None
        path.append((container, index))
    return path or None


def below(contracts: dict[str, list[set[str]]], lower: str, upper: str) -> bool:
    """Whether the contracts put `lower` in a layer strictly below `upper`'s, in the innermost
    container that holds both (a higher index is a lower layer)."""
    low, up = layer_path(contracts, lower), layer_path(contracts, upper)
    if not low or not up:
        return False
    for (container_a, a), (container_b, b) in zip(low, up):
        if container_a != container_b:
            return False
        if a != b:
            return a > b
    return False


# --- the check ----------------------------------------------------------------------------------------


def check(root: Path) -> list[str]:
    errors: list[str] = []
    allowlist_path = root / ALLOWLIST
    try:
        allowlist = tomllib.loads(allowlist_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return [f"{ALLOWLIST}: cannot read it: {exc}"]
    pyproject = tomllib.loads((root / PYPROJECT).read_text(encoding="utf-8"))
    private: dict = allowlist.get("private", {})
    imports: dict = allowlist.get("imports", {})
    forwarders: list = allowlist.get("forwarders", [])

    files = [read_rust(p, p.relative_to(root).as_posix()) for p in sorted((root / RUST_SRC).rglob("*.rs"))]
    seams = Seams()
    for rust in files:
        scan(rust, seams)

    # Names computed at run time: allowed only inside a listed helper, whose call sites are read.
    used_forwarders: set[int] = set()
    for site, kind, function in seams.dynamic:
        matches = [
            k
            for k, f in enumerate(forwarders)
            if site.file.endswith(f.get("file", "\0"))
            and f.get("function") == function
            and f"{'module' if kind == 'import' else 'attribute'}_argument" in f
        ]
        if matches:
            used_forwarders.update(matches)
            continue
        errors.append(
            f"{site.file}:{site.line}: Rust reaches a Python {'module' if kind == 'import' else 'attribute'} "
            f"by a computed name ({site.via}: {site.name!r}) in fn {function or '?'}; the checker cannot "
            f"see it: use a literal name, or list this function under [[forwarders]] in {ALLOWLIST} "
            f"(the argument of its callers that carries the name, and a reason)"
        )
    for k, entry in enumerate(forwarders):
        where = f"{ALLOWLIST}: [[forwarders]] {entry.get('file')}::{entry.get('function')}"
        if not str(entry.get("reason", "")).strip():
            errors.append(f"{where}: give a one-line reason")
        if k not in used_forwarders:
            errors.append(f"{where}: no computed name is looked up there any more: remove the entry")
            continue
        call = entry.get("call", entry.get("function"))
        count = 0
        for kind, key in (("import", "module_argument"), ("attribute", "attribute_argument")):
            if key in entry:
                count += sum(scan_forwarded(r, call, entry[key], kind, seams, errors) for r in files)
        if not count:
            errors.append(f"{where}: nothing calls {call}(...): remove the entry")

    # Private attributes.
    read: dict[str, list[Site]] = {}
    for site in seams.attributes.values():
        if is_private(site.name):
            read.setdefault(site.name, []).append(site)
    for name, sites in sorted(read.items()):
        if name not in private:
            for site in sorted(sites, key=lambda s: (s.file, s.line)):
                errors.append(
                    f"{site.file}:{site.line}: Rust reads the private Python attribute {name!r} "
                    f"({site.via}), which {ALLOWLIST} does not list. A rename in Python would break "
                    f"this at run time, not at lint time: read a public interface instead, or add "
                    f"{name} to [private] there with its owner and a one-line reason"
                )
    for name, entry in sorted(private.items()):
        where = f"{ALLOWLIST}: [private] {name}"
        if not isinstance(entry, dict) or not str(entry.get("reason", "")).strip():
            errors.append(f"{where}: give an owner and a one-line reason")
            continue
        if name not in read:
            errors.append(f"{where}: Rust no longer reads it: remove the entry")
        module, _, class_name = str(entry.get("owner", "")).partition(":")
        path = module_file(root, module)
        names = defined_names(ast.parse(path.read_text(encoding="utf-8")), class_name or None) if path else None
        if names is None:
            errors.append(f"{where}: its owner {entry.get('owner')!r} is not a module or class of freight")
        elif name not in names and name in read:
            errors.append(
                f"{where}: {entry.get('owner')} no longer defines {name}, and Rust reads it "
                f"({', '.join(f'{s.file}:{s.line}' for s in read[name])}): rename it there too"
            )

    # Imports.
    imported: dict[str, list[Site]] = {}
    for site in seams.imports:
        imported.setdefault(site.name, []).append(site)
    for module, sites in sorted(imported.items()):
        if module not in imports:
            for site in sorted(sites, key=lambda s: (s.file, s.line)):
                errors.append(
                    f"{site.file}:{site.line}: Rust imports {module} at run time ({site.via}), which "
                    f"{ALLOWLIST} does not list under [imports], so no import contract covers it: add "
                    f"it there with a one-line reason (for a module of freight, the Python modules "
                    f"whose calls into the extension reach it: it must sit below them in "
                    f"pyproject.toml's [tool.importlinter] layers)"
                )
    contracts = layer_contracts(pyproject)
    importers: list[str] | None = None
    for module, entry in sorted(imports.items()):
        where = f"{ALLOWLIST}: [imports] {module}"
        if not isinstance(entry, dict) or not str(entry.get("reason", "")).strip():
            errors.append(f"{where}: give a one-line reason")
            continue
        if module not in imported:
            errors.append(f"{where}: Rust no longer imports it: remove the entry")
        if module.split(".")[0] != "freight":
            continue
        if module_file(root, module) is None:
            errors.append(f"{where}: no such module in {PACKAGE}")
            continue
        if layer_path(contracts, module) is None:
            errors.append(f"{where}: no layer of pyproject.toml's [tool.importlinter] contracts names it")
            continue
        reached = entry.get("reached_from")
        if importers is None:
            importers = extension_importers(root)
        callers = importers if reached == "*" else list(reached or [])
        if not callers:
            errors.append(f"{where}: say reached_from: the Python modules whose calls into {EXTENSION} import it")
        for caller in callers:
            if caller not in importers:
                errors.append(f"{where}: reached_from names {caller}, which does not import {EXTENSION}")
            elif not below(contracts, module, caller):
                errors.append(
                    f"{where}: the import contracts do not put it below {caller}, which reaches it "
                    f"through {EXTENSION}: an import circle import-linter cannot see"
                )
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the tree")
    args = parser.parse_args(argv)
    errors = check(args.root)
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"check_rust_seams: {len(errors)} finding(s); the seams are listed in {ALLOWLIST}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
