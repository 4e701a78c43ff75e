"""``freight ls URL KEY [ENTRY...]`` and ``freight cat URL KEY ENTRY...`` (and the same on a
payload file): a stored value's entries listed from its header, one entry printed reading only
its frames; on a local folder store, on the S3 test server (the ``s3_env`` fixture of
tests/storage/conftest.py: its ``AWS_*`` variables reach the ``python -m freight`` subprocess
through the environment) and on files. Bytes read are what the command reports on stderr, and
are checked against the parts' sizes."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight import cli

# The S3 server fixtures live with the storage tests; pytest finds them here through this import.
from storage.conftest import s3_env, s3_server  # noqa: F401

MiB = 1 << 20
SIGN_KEY = b"s" * 32
BIG = 2_000_000  # rows of the float64 arrays: 15 MiB each
_prefixes = itertools.count()


def value() -> dict:
    pa = pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    return {
        "w1": rng.random(BIG),
        "w2": rng.random(BIG),
        "m": np.arange(12, dtype="i4").reshape(4, 3),
        "nested": {"deep": {"x": rng.random(BIG)}, 3: "int three", "3": "str three", "small": [1, 2, 3]},
        "table": pa.table({"p": rng.random(100_000), "q": np.arange(100_000), "s": ["x"] * 100_000}),
        "step": 7,
        "name": "run-7",
        "items": [np.arange(5), "a"],
    }


def freight_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "freight", *argv], capture_output=True, text=True, timeout=120)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def bytes_read(err: str) -> int:
    """The bytes a command says it read ("read 64.0 KiB of 1.7 MiB (65,536 bytes)")."""
    match = re.search(r"read \S+ \S+ of \S+ \S+ \(([\d,]+) bytes\)", err)
    assert match, err
    return int(match.group(1).replace(",", ""))


def rows(out: str) -> dict[str, list[str]]:
    """{entry: cells} of an entries table (between the dashes and the total line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----")) + 1
    return {line.split()[0]: line.split() for line in lines[start:-1]}


@pytest.fixture(params=["file", "s3"])
def stored(request, tmp_path: Path) -> tuple[str, fs.Store, dict]:
    """(url, store, value) with ``value()`` saved under "run", checksummed and uncompressed (so
    slices read digest blocks), and "run/signed" signed."""
    if request.param == "file":
        url = str(tmp_path / "store")
    else:
        server = request.getfixturevalue("s3_env")
        url = f"s3://{server.bucket}/entries-{next(_prefixes)}"
    store = fs.open(url, compression="none")
    v = value()
    store.save("run", v)
    store.save("other", [1, 2])
    fs.open(url, freight=freight.Freight(key=SIGN_KEY), compression="none").save("signed", {"a": v["w1"], "b": 1})
    return url, store, v


# --------------------------------------------------------------------------------------------
# ls URL KEY
# --------------------------------------------------------------------------------------------


def test_ls_of_a_key_lists_its_entries_from_the_header(stored):
    url, store, v = stored
    proc = freight_cli("ls", url, "run")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f'{store.url}: "run": a dict of {len(v)} entries'
    assert lines[1].split() == ["entry", "kind", "details", "size", "stored"]
    table = rows(proc.stdout)
    assert list(table) == list(v)
    assert table["w1"][:3] == ["w1", "ndarray", "float64"] and "(2000000,)" in table["w1"]
    assert table["w1"][-4:] == ["15.3", "MiB", "15.3", "MiB"]  # size and stored size
    assert table["m"][1:4] == ["ndarray", "int32", "(4,"]
    assert table["nested"][1:4] == ["dict", "4", "entries"]
    assert table["table"][1:4] == ["pyarrow.Table", "3", "columns:"]
    assert table["step"][1:3] == ["int", "7"] and table["name"][1:3] == ["str", "'run-7'"]
    assert table["items"][1:4] == ["list", "2", "items"]
    # the header alone was read: the first read of the object (64 KiB at most)
    total = store.head("run").size
    assert lines[-1].startswith(f"{len(v)} entries, ") and bytes_read(lines[-1]) <= 64 << 10 < total


def test_ls_of_nested_entries_and_of_an_entry_that_is_not_a_container(stored):
    url, store, _ = stored
    proc = freight_cli("ls", url, "run", "nested")
    assert proc.returncode == 0, proc.stderr
    table = rows(proc.stdout)
    # int 3 is shown as 3, the string "3" by its repr: each names its own entry again
    assert list(table) == ["deep", "3", "'3'", "small"]
    assert table["3"][1:3] == ["str", "'int"] and table["'3'"][1:3] == ["str", "'str"]
    proc = freight_cli("ls", url, "run", "nested", "deep")
    assert proc.returncode == 0 and list(rows(proc.stdout)) == ["x"]
    proc = freight_cli("ls", url, "run", "nested", "small")  # a list held in the header
    assert proc.returncode == 0 and "(held in the header)" in proc.stdout and list(rows(proc.stdout)) == ["0", "1", "2"]
    proc = freight_cli("ls", url, "run", "w2")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[:2] == [
        f"{store.url}: \"run\"['w2']: ndarray",
        "  dtype float64, shape (2000000,), 15.3 MiB (16,000,000 bytes)",
    ]
    proc = freight_cli("ls", url, "run", "table")
    assert proc.returncode == 0
    columns = [line.split()[:2] for line in proc.stdout.splitlines()[3:6]]
    assert columns == [["p", "double"], ["q", "int64"], ["s", "string"]]
    assert bytes_read(proc.stdout.splitlines()[-1]) <= 64 << 10


def test_ls_of_a_prefix_is_unchanged_and_ambiguous_keys_say_so(stored, tmp_path):
    url, store, _ = stored
    proc = freight_cli("ls", url, "oth")  # a prefix, not a key: the values under it
    assert proc.returncode == 0 and proc.stdout.splitlines()[0].split() == ["size", "modified", "key"]
    proc = freight_cli("ls", url, "other", "-k")  # --keys: the listing even for a key
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith("1 value, ")
    proc = freight_cli("ls", url, "other")  # a key alone: its entries
    assert proc.returncode == 0 and list(rows(proc.stdout)) == ["0", "1"]
    store.save("other-2", 2)  # "other" is now a key and a prefix: the listing, and a hint
    proc = freight_cli("ls", url, "other")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith("2 values, ")
    assert proc.stderr == f'freight ls: "other" is also a stored value; `freight ls -e {url} other` lists its entries\n'
    proc = freight_cli("ls", "-e", url, "other")
    assert proc.returncode == 0 and list(rows(proc.stdout)) == ["0", "1"]
    store.save("plain", np.arange(10))  # not a container: listed as a value, as before
    proc = freight_cli("ls", url, "plain")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1].startswith("1 value, ")


def test_ls_entry_errors(stored):
    url, store, _ = stored
    proc = freight_cli("ls", url, "run", "nope")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f'freight ls: {store.url}: "run" has no entry nope; its entries are w1, w2, m,')
    proc = freight_cli("ls", url, "run", "items", "x")
    assert proc.returncode == 1 and "is a list: name an entry by its index (0 to 1)" in proc.stderr
    proc = freight_cli("ls", url, "run", "step", "x")
    assert proc.returncode == 1 and "['step'] has no entries: it is a int" in proc.stderr
    proc = freight_cli("ls", "-e", url, "missing")
    assert proc.returncode == 1 and proc.stderr == f'freight ls: {store.url}: no value is stored under "missing"\n'


# --------------------------------------------------------------------------------------------
# cat URL KEY ENTRY...
# --------------------------------------------------------------------------------------------


def test_cat_of_an_array_entry_reads_only_it(stored):
    url, store, v = stored
    proc = freight_cli("cat", url, "run", "w2")
    assert proc.returncode == 0, proc.stderr
    with np.printoptions(threshold=1000):  # numpy's own summary of a large array
        assert proc.stdout == repr(v["w2"]) + "\n"
    assert "..." in proc.stdout and len(proc.stdout) < 1000
    n = bytes_read(proc.stderr)
    assert proc.stderr.startswith(f"freight cat: {store.url}: \"run\"['w2']: read ")
    assert v["w2"].nbytes <= n <= 1.05 * v["w2"].nbytes + (64 << 10)  # this array, the header: not w1 or x
    assert n < store.head("run").size / 2


def test_cat_rows_and_columns_read_only_their_blocks(stored):
    pa = pytest.importorskip("pyarrow")
    url, store, v = stored
    proc = freight_cli("cat", url, "run", "nested", "deep", "x", "--rows", "1000000:1000005")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == repr(v["nested"]["deep"]["x"][1_000_000:1_000_005]) + "\n"
    assert bytes_read(proc.stderr) <= (64 << 10) + (128 << 10)  # the header, a digest block or two
    proc = freight_cli("cat", url, "run", "m", "--rows", "-1")
    assert proc.returncode == 0 and proc.stdout == repr(v["m"][-1]) + "\n"
    proc = freight_cli("cat", url, "run", "table", "--columns", "q", "--rows", "10:13")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == repr(v["table"].select(["q"]).slice(10, 3)) + "\n"
    # column q alone: 800,000 bytes, not p's or s's
    assert bytes_read(proc.stderr) <= (64 << 10) + 800_000 + (64 << 10)
    assert isinstance(pa.table({"q": [1]}), pa.Table)


def test_cat_of_scalars_containers_and_odd_names(stored):
    url, _, v = stored
    for words, expected in (
        (["step"], "7"),
        (["name"], "'run-7'"),
        (["nested", "3"], "'int three'"),
        (["nested", "'3'"], "'str three'"),
        (["nested", "small", "-1"], "3"),
        (["items", "1"], "'a'"),
        (["items", "0"], repr(np.arange(5))),
    ):
        proc = freight_cli("cat", url, "run", *words)
        assert proc.returncode == 0 and proc.stdout == expected + "\n", (words, proc.stderr)
    proc = freight_cli("cat", url, "run", "nested", "deep")  # a container: loaded, printed whole
    assert proc.returncode == 0 and proc.stdout.startswith("{'x': array([")


def test_cat_errors_and_usage(stored):
    url, store, _ = stored
    proc = freight_cli("cat", url, "run", "step", "--rows", "0:1")
    assert proc.returncode == 1 and proc.stderr.endswith(
        "--rows reads rows of an array; " + f"{store.url}: \"run\"['step'] is a int\n"
    )
    proc = freight_cli("cat", url, "run", "w1", "--rows", "a:b")
    assert proc.returncode == 1 and "write rows as A:B" in proc.stderr
    proc = freight_cli("cat", url, "run", "table", "--columns", "zz")
    assert proc.returncode == 1 and "has no column(s) ['zz']" in proc.stderr
    proc = freight_cli("cat", url)
    assert proc.returncode == 2 and "error: the following arguments are required: KEY" in proc.stderr
    # no ENTRY: what inspect prints, as before
    proc = freight_cli("cat", url, "run")
    assert proc.returncode == 0 and proc.stdout.startswith(f"store:           {store.url}\nkey:             run\n")


def test_signed_values_are_authenticated_with_a_key_file(stored, tmp_path):
    url, _, v = stored
    (tmp_path / "key").write_bytes(SIGN_KEY + b"\n")
    (tmp_path / "wrong").write_bytes(b"another key\n")
    proc = freight_cli("cat", url, "signed", "a", "--rows", "5:7", "--key-file", str(tmp_path / "key"))
    assert proc.returncode == 0 and proc.stdout == repr(v["w1"][5:7]) + "\n", proc.stderr
    proc = freight_cli("cat", url, "signed", "a", "--rows", "5:7", "--key-file", str(tmp_path / "wrong"))
    assert proc.returncode == 1 and proc.stdout == "" and "signature does not match" in proc.stderr
    proc = freight_cli("ls", url, "signed", "--key-file", str(tmp_path / "wrong"))
    assert proc.returncode == 1 and "signature does not match" in proc.stderr


def test_a_value_pickled_as_a_whole_has_no_entries(tmp_path, capsys):
    """A value freight has no native form for is one pickle: nothing in it can be read alone,
    and nothing is unpickled to say so. (Inside a dict, such an object is pickled where it is
    met, and the dict's other entries are read alone: see the next test.)"""
    import fractions

    url = str(tmp_path / "store")
    fs.open(url).save("objs", fractions.Fraction(1, 3))
    rc, out, err = run(capsys, "cat", url, "objs", "n", "--allow-pickle")
    assert rc == 1 and out == ""
    assert err.endswith('"objs" has no entries: it is a pickle (the value was pickled as a whole)\n')
    rc, out, err = run(capsys, "ls", "-e", url, "objs")
    assert rc == 1 and "is a pickle, not a dict, list or tuple: it has no entries (it was pickled as a whole)" in err
    rc, out, err = run(capsys, "ls", url, "objs")  # listed as a value, as before
    assert rc == 0 and out.splitlines()[-1].startswith("1 value, ")


def test_entries_beside_a_pickled_object_are_read_alone(tmp_path, capsys):
    url = str(tmp_path / "store")
    fs.open(url).save("objs", {"when": np.array([object(), 1], dtype=object), "n": 41})
    rc, out, err = run(capsys, "cat", url, "objs", "n")  # no pickle needed for this entry
    assert rc == 0 and out == "41\n"


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def test_ls_and_cat_of_a_payload_file(tmp_path, capsys):
    v = value()
    path = str(tmp_path / "run.frt")
    freight.dump(v, path, compression="none")
    rc, out, err = run(capsys, "ls", path)
    assert rc == 0 and err == ""
    assert out.splitlines()[0] == f"{path}: a dict of {len(v)} entries" and list(rows(out)) == list(v)
    rc, out, err = run(capsys, "ls", path, "nested")
    assert rc == 0 and list(rows(out)) == ["deep", "3", "'3'", "small"]
    rc, out, err = run(capsys, "cat", path, "w1", "--rows", "10:12")
    assert rc == 0 and out == repr(v["w1"][10:12]) + "\n"
    assert bytes_read(err) <= (64 << 10) * 2
    rc, out, err = run(capsys, "cat", path, "m")
    assert rc == 0 and out == repr(v["m"]) + "\n"
    assert bytes_read(err) < (64 << 10) + 1024  # the header and the 48 bytes of m
    rc, out, _ = run(capsys, "cat", path)  # no ENTRY: what inspect prints
    assert rc == 0 and out.startswith(f"file:            {path}\n")
    rc, _, err = run(capsys, "ls", path, "nope")
    assert rc == 1 and err.startswith(f"freight ls: {path} has no entry nope; ")


def test_help_describes_entries(capsys):
    for command in ("ls", "cat"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "ENTRY" in out and "--allow-pickle" in out
    assert "--rows" in freight_cli("cat", "--help").stdout
