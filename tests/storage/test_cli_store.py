"""The store subcommands of the command line (``freight ls``, ``cat``, ``rm``, ``cp``), run as
``python -m freight`` subprocesses on a local folder store and on the S3 test server (the
``AWS_*`` variables of the ``s3_env`` fixture reach the subprocess through the environment); and
the optional progress bar of :mod:`freight.storage.progress`.
"""

from __future__ import annotations

import fractions
import io
import itertools
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight.cli.common import fmt_bytes as _fmt_bytes
from freight.exceptions import KeyNotFoundError
from freight.storage import copy_values
from freight.storage.progress import THRESHOLD, progress

SIGN_KEY = b"s" * 32
ODD_KEYS = ["a b#c%d", "run-3/_t.<locals>.s_0"]
_prefixes = itertools.count()


def values() -> dict[str, object]:
    return {
        "a b#c%d": [1, 2, 3],
        "run-3/_t.<locals>.s_0": {"x": np.arange(100_000.0), "n": 7},
        "run-3/ratio": fractions.Fraction(1, 3),  # encoded with pickle: needs_pickle
        "plain": "text",
    }


def freight_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "freight", *argv], capture_output=True, text=True, timeout=120, env=env
    )


def fill(url: str) -> fs.Store:
    store = fs.open(url)
    for key, value in values().items():
        store.save(key, value)
    store.save("signed", np.arange(10), sign_key=SIGN_KEY)
    return store


def assert_same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b and type(a) is type(b)


def table_rows(out: str) -> list[str]:
    """The rows of an ``ls`` table (between the dashes and the total line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("----")) + 1
    return lines[start:-1]


def table(out: str) -> dict[str, str]:
    """{key: row} of an ``ls`` table: the key is the rest of the row from the key column on."""
    column = out.splitlines()[0].rindex("key")
    return {row[column:]: row for row in table_rows(out)}


@pytest.fixture
def file_url(tmp_path: Path) -> str:
    return str(tmp_path / "store")


def s3_url(server) -> str:
    return f"s3://{server.bucket}/cli-{next(_prefixes)}"


@pytest.fixture(params=["file", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store on a folder, or under a fresh prefix of the S3 test server's bucket."""
    if request.param == "file":
        return str(tmp_path / "store")
    return s3_url(request.getfixturevalue("s3_env"))


# --------------------------------------------------------------------------------------------
# ls
# --------------------------------------------------------------------------------------------


def test_ls_prints_every_key_exactly_with_its_size_and_a_total(url):
    store = fill(url)
    listed = store.list_objects("")
    proc = freight_cli("ls", url)
    assert proc.returncode == 0 and proc.stderr == ""
    rows = table_rows(proc.stdout)
    assert len(rows) == len(listed)
    for row, (key, size, _, _) in zip(rows, listed):
        assert row.endswith("  " + key)  # the key last, as it is ("a b#c%d", "<locals>")
        assert row.split()[:2] == _fmt_bytes(size, exact=False).split()
    assert list(table(proc.stdout)) == [o.key for o in listed]
    assert set(table(proc.stdout)) >= set(ODD_KEYS)
    total = sum(o.size for o in listed)
    assert proc.stdout.splitlines()[-1] == f"{len(listed)} values, {_fmt_bytes(total)}"
    assert proc.stdout.splitlines()[0].split() == ["size", "modified", "key"]


def test_ls_with_a_prefix_and_on_an_empty_store(url):
    fill(url)
    proc = freight_cli("ls", url, "run-3/")
    assert proc.returncode == 0
    assert list(table(proc.stdout)) == ["run-3/_t.<locals>.s_0", "run-3/ratio"]
    assert proc.stdout.splitlines()[-1].startswith("2 values, ")
    proc = freight_cli("ls", url, "nothing/")
    assert proc.returncode == 0 and proc.stdout.endswith(': no values under "nothing/"\n')


def test_ls_long_shows_pickle_signed_and_tags(url):
    pd = pytest.importorskip("pandas")
    store = fill(url)
    store.save("frame", pd.DataFrame({"a": np.arange(5)}))
    proc = freight_cli("ls", "-l", url)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines()[0].split() == ["size", "modified", "pickle", "signed", "tags", "key"]
    rows = table(proc.stdout)
    for key in store.list():
        info = store.info(key)
        cells = rows[key].split()
        assert cells[4:6] == ["yes" if info["needs_pickle"] else "no", "yes" if info["signed"] else "no"], rows[key]
        assert (", ".join(info["tags"]) or "-") in rows[key]
    assert "pandas.DataFrame" in rows["frame"]
    assert rows["run-3/ratio"].split()[4] == "yes" and rows["signed"].split()[5] == "yes"


def test_ls_long_marks_a_file_that_is_not_a_payload(file_url):
    fill(file_url)
    (Path(file_url) / "junk").write_bytes(b"not a freight payload at all")
    proc = freight_cli("ls", file_url, "-l")
    assert proc.returncode == 0
    assert "(not a freight payload)" in table(proc.stdout)["junk"]


def test_ls_long_lists_an_empty_object_as_not_a_payload(url):
    """Before, one empty object stopped ``ls -l`` with "info failed: Requested range was
    invalid; check that the folder exists and is writable" (exit 1, nothing listed)."""
    store = fill(url)
    store.put_bytes("empty", b"")
    proc = freight_cli("ls", "-l", url)
    assert proc.returncode == 0 and proc.stderr == ""
    rows = table(proc.stdout)
    assert "(not a freight payload)" in rows["empty"] and set(rows) == set(store.list())


# --------------------------------------------------------------------------------------------
# cat
# --------------------------------------------------------------------------------------------


def test_cat_shows_the_frame_table_and_the_tags(url):
    pd = pytest.importorskip("pandas")
    store = fill(url)
    store.save("frame", pd.DataFrame({"a": np.arange(5), "s": ["x"] * 5}))
    proc = freight_cli("cat", url, "frame")
    assert proc.returncode == 0 and proc.stderr == ""
    out = proc.stdout
    assert f"store:           {store.url}\nkey:             frame\n" in out
    assert "serializer tags: pandas.DataFrame" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("#"))
    assert header.split() == ["#", "offset", "size", "checksum", "status"]
    frames = freight.inspect(store.get_bytes("frame"))["frames"]
    assert out.count(" ok\n") == len(frames) > 0


def test_cat_prints_what_inspect_prints_for_the_file(file_url):
    store = fill(file_url)
    for key in ("plain", "run-3/_t.<locals>.s_0"):
        path = str(Path(file_url) / key.replace("<", "%3C").replace(">", "%3E"))
        inspect = freight_cli("inspect", path)
        cat = freight_cli("cat", file_url, key)
        assert inspect.returncode == cat.returncode == 0
        assert inspect.stdout.startswith(f"file:            {path}\n")
        # cat names the store, the key and the time instead of the file; the rest is the same
        cat_lines = cat.stdout.splitlines()
        assert cat_lines[:2] == [f"store:           {store.url}", f"key:             {key}"]
        assert cat_lines[2].startswith("modified:        ")
        assert cat_lines[3:] == inspect.stdout.splitlines()[1:]


def test_cat_checks_the_signature_with_a_key_file(file_url, tmp_path):
    fill(file_url)
    (tmp_path / "key").write_bytes(SIGN_KEY + b"\n")
    proc = freight_cli("cat", file_url, "signed", "--key-file", str(tmp_path / "key"))
    assert proc.returncode == 0 and "signed:          yes, signature ok" in proc.stdout


def test_cat_of_a_missing_key_or_a_file_that_is_not_a_payload_fails(url):
    store = fill(url)
    proc = freight_cli("cat", url, "missing")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == f'freight cat: {store.url}: no value is stored under "missing"\n'
    store.put_bytes("junk", b"not a freight payload")
    proc = freight_cli("cat", url, "junk")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"freight cat: {store.url}: \"junk\": not a freight payload: it starts with b'not ' (hex 6e 6f 74 20), "
        "where every freight payload starts with the magic bytes b'\\x89FRT' (hex 89 46 52 54)\n"
    )


# --------------------------------------------------------------------------------------------
# rm
# --------------------------------------------------------------------------------------------


def test_rm_removes_keys_and_says_which(url):
    store = fill(url)
    proc = freight_cli("rm", url, "a b#c%d", "plain")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == "removed a b#c%d\nremoved plain\n"
    assert store.list() == ["run-3/_t.<locals>.s_0", "run-3/ratio", "signed"]


def test_rm_refuses_a_side_object_of_a_value_that_is_there(file_url, tmp_path):
    """Before, ``freight rm URL KEY.freight-side/...`` removed it and the value no longer loaded."""
    import pandas as pd

    store = fs.open(file_url)
    store.register_persistent(freight.storage.persistent.PandasParquet())
    store.save("frame", pd.DataFrame({"a": [1, 2]}))
    store.save("other", 1)
    side = [o.key for o in store.list_objects("frame.", side_objects=True)]
    proc = freight_cli("rm", file_url, side[0], "other")
    assert proc.returncode == 1 and proc.stdout == "removed other\n"
    assert 'reaches the side objects of the value "frame"' in proc.stderr
    proc = freight_cli("rm", file_url, "--prefix", "frame.")
    assert proc.returncode == 1 and "delete the value itself" in proc.stderr
    assert [o.key for o in store.list_objects("frame.", side_objects=True)] == side
    assert store.load("frame")["a"].tolist() == [1, 2]


def test_rm_prefix(url):
    store = fill(url)
    proc = freight_cli("rm", url, "--prefix", "run-3/")
    assert proc.returncode == 0 and proc.stdout == 'removed 2 values under "run-3/"\n'
    assert store.list() == ["a b#c%d", "plain", "signed"]
    proc = freight_cli("rm", url, "--prefix", "run-3/")
    assert proc.returncode == 0 and "nothing removed" in proc.stdout


def test_rm_of_a_missing_key_fails_with_a_clear_message_and_removes_the_others(url):
    store = fill(url)
    proc = freight_cli("rm", url, "missing", "plain")
    assert proc.returncode == 1
    assert proc.stderr == f'freight rm: {store.url}: no value is stored under "missing"\n'
    assert proc.stdout == "removed plain\n"
    assert not store.exists("plain")


# --------------------------------------------------------------------------------------------
# cp
# --------------------------------------------------------------------------------------------


def check_copied(src: fs.Store, dst: fs.Store, keys: list[str]) -> None:
    for key in keys:
        assert bytes(dst.get_bytes(key)) == bytes(src.get_bytes(key)), key  # byte for byte
        if key == "signed":
            np.testing.assert_array_equal(dst.load(key, key=SIGN_KEY, verify=True), np.arange(10))
        else:
            assert_same(dst.load(key), values()[key])


def test_cp_file_to_s3_and_back(file_url, s3_env, tmp_path):
    src = fill(file_url)
    s3 = s3_url(s3_env)
    proc = freight_cli("cp", file_url, s3)
    assert proc.returncode == 0, proc.stderr
    keys = src.list()
    assert fs.open(s3).list() == keys
    check_copied(src, fs.open(s3), keys)
    assert proc.stdout.splitlines()[-1].startswith(f"copied {len(keys)} values, ")
    assert proc.stdout.splitlines()[-1].endswith(f": {src.url} -> {s3}")
    assert [line[12:] for line in proc.stdout.splitlines()[:-1]] == keys  # "{size:>10}  {key}"

    back = str(tmp_path / "back")
    proc = freight_cli("cp", s3, back, "signed", "--prefix", "run-3/", "a b#c%d")
    assert proc.returncode == 0, proc.stderr
    copied = ["signed", "a b#c%d", "run-3/_t.<locals>.s_0", "run-3/ratio"]
    assert sorted(fs.open(back).list()) == sorted(copied)
    check_copied(src, fs.open(back), copied)
    # the files of the copy are the files of the original
    assert (Path(back) / "run-3" / "ratio").read_bytes() == (Path(file_url) / "run-3" / "ratio").read_bytes()


def test_cp_no_clobber_keeps_the_destinations_values(file_url, tmp_path):
    src = fill(file_url)
    dst_url = str(tmp_path / "dst")
    dst = fs.open(dst_url)
    dst.save("plain", "theirs")
    proc = freight_cli("cp", "-n", file_url, dst_url, "plain", "a b#c%d")
    assert proc.returncode == 0
    assert dst.load("plain") == "theirs" and dst.load("a b#c%d") == [1, 2, 3]
    assert "kept  plain" in proc.stdout and "kept 1 value the destination already had" in proc.stdout
    proc = freight_cli("cp", file_url, dst_url, "plain")
    assert proc.returncode == 0 and dst.load("plain") == "text"
    check_copied(src, dst, ["plain"])


def test_cp_of_a_missing_key_fails_and_copies_the_others(file_url, s3_env):
    store = fill(file_url)
    s3 = s3_url(s3_env)
    proc = freight_cli("cp", file_url, s3, "missing", "plain")
    assert proc.returncode == 1
    assert proc.stderr == f'freight cp: {store.url}: no value is stored under "missing"\n'
    assert fs.open(s3).list() == ["plain"]


def test_copy_values_from_a_memory_store(file_url):
    src = fs.open("memory://")
    for key, value in values().items():
        src.save(key, value)
    dst = fs.open(file_url)
    done = copy_values(src, dst, prefix="run-3/")
    assert [(key, event) for key, event, _ in done] == [("run-3/_t.<locals>.s_0", "copied"), ("run-3/ratio", "copied")]
    check_copied(src, dst, ["run-3/_t.<locals>.s_0", "run-3/ratio"])
    assert [event for _, event, _ in copy_values(src, dst, ["run-3/ratio"], if_absent=True)] == ["kept"]
    with pytest.raises(KeyNotFoundError):
        copy_values(src, dst, ["plain", "missing"])
    assert not dst.exists("plain")  # checked before anything was copied
    copy_values(src, dst)
    check_copied(src, dst, list(values()))


# --------------------------------------------------------------------------------------------
# Side objects (freight.storage.persistent): they go with their value
# --------------------------------------------------------------------------------------------


def persistent_store(url: str) -> fs.Store:
    from freight.storage import persistent

    store = fs.open(url)
    store.register_persistent(persistent.PandasParquet())
    return store


def side_keys(store: fs.Store, key: str) -> list[str]:
    from freight.storage.side_objects import SIDE

    return [o.key for o in store.list_objects(key + SIDE, side_objects=True)]


def test_side_objects_are_listed_with_a_and_counted_in_the_total(url):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    store = persistent_store(url)
    store.save("frame", pd.DataFrame({"a": np.arange(50)}))
    store.save("plain", 1)
    # The parquet file, and the record of the reference the envelope holds.
    sides = side_keys(store, "frame")
    (side,) = [key for key in sides if key.endswith("data.parquet")]
    assert len(sides) == 2
    proc = freight_cli("ls", url)
    assert proc.returncode == 0 and list(table(proc.stdout)) == ["frame", "plain"]
    assert proc.stdout.splitlines()[-1].startswith("2 values (") and " and 2 side objects (" in proc.stdout
    proc = freight_cli("ls", url, "-a")
    assert list(table(proc.stdout)) == ["frame", *sides, "plain"]
    proc = freight_cli("ls", url, "frame.")  # side objects only: no table without -a, the total
    assert proc.returncode == 0 and proc.stdout.startswith("0 values (0 B) and 2 side objects (")
    proc = freight_cli("ls", url, "-l")
    assert "2 side objects, " in table(proc.stdout)["frame"]
    assert "freight.persistent.pandas-parquet" in table(proc.stdout)["frame"]
    proc = freight_cli("cat", url, side)
    assert proc.returncode == 1 and 'a side object of "frame", not a freight payload' in proc.stderr


def test_cp_copies_side_objects_before_their_value_and_rm_removes_them(file_url, s3_env, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"a": np.arange(50), "s": ["x"] * 50})
    src = persistent_store(file_url)
    src.save("run/frame", frame)
    src.save("run/plain", [1, 2])
    s3 = s3_url(s3_env)
    proc = freight_cli("cp", file_url, s3, "--prefix", "run/")
    assert proc.returncode == 0, proc.stderr
    assert "copied 2 values and 2 side objects, " in proc.stdout
    assert "run/frame  (+ 2 side objects, " in proc.stdout
    copy = persistent_store(s3)
    pd.testing.assert_frame_equal(copy.load("run/frame"), frame)
    assert side_keys(copy, "run/frame") == side_keys(src, "run/frame")

    # a copy over a value saved earlier removes the destination's older side objects
    back_url = str(tmp_path / "back")
    back = persistent_store(back_url)
    back.save("run/frame", frame.head(3))
    old = side_keys(back, "run/frame")
    assert old != side_keys(src, "run/frame")
    proc = freight_cli("cp", s3, back_url, "run/frame")
    assert proc.returncode == 0, proc.stderr
    assert side_keys(back, "run/frame") == side_keys(src, "run/frame")
    pd.testing.assert_frame_equal(back.load("run/frame"), frame)

    proc = freight_cli("rm", s3, "run/frame")
    assert proc.returncode == 0 and proc.stdout == "removed run/frame and its 2 side objects\n"
    assert [o.key for o in fs.open(s3).list_objects("", side_objects=True)] == ["run/plain"]
    proc = freight_cli("rm", back_url, "--prefix", "run/")
    assert proc.returncode == 0 and proc.stdout == 'removed 1 value and 2 side objects under "run/"\n'
    assert back.list_objects("", side_objects=True) == []


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["cat", "{url}"],
        ["rm", "{url}"],
        ["rm", "{url}", "--prefix", ""],
        ["cp", "{url}"],
        ["cp", "{url}", "{url}"],
        ["ls", "memory://"],
        ["ls", "{url}", "--unknown"],
    ],
)
def test_usage_errors_exit_with_status_2(file_url, argv):
    fill(file_url)
    proc = freight_cli(*(a.format(url=file_url) for a in argv))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "usage: freight" in proc.stderr and "error: " in proc.stderr
    assert fs.open(file_url).list()  # nothing was removed


def test_a_storage_error_is_one_line_on_stderr(s3_env):
    proc = freight_cli("ls", f"s3://no-such-bucket-{next(_prefixes)}/x")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("freight ls: s3://no-such-bucket-") and proc.stderr.count("\n") == 1
    assert "check the credentials" in proc.stderr
    proc = freight_cli("ls", "s3:///x")
    assert proc.returncode == 1 and proc.stderr.startswith('freight ls: cannot open store "s3:///x"')


# --------------------------------------------------------------------------------------------
# The progress bar
# --------------------------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeTqdm:
    """Records what the progress bar is asked to do."""

    instances: list[FakeTqdm] = []
    written: list[str] = []

    def __init__(self, **kw: object) -> None:
        self.kw = kw
        self.n = 0
        self.postfix = ""
        self.closed = False
        FakeTqdm.instances.append(self)

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        self.closed = True

    @classmethod
    def write(cls, text: str, file: object = None) -> None:
        cls.written.append(text)


@pytest.fixture
def fake_tqdm(monkeypatch: pytest.MonkeyPatch) -> type[FakeTqdm]:
    FakeTqdm.instances, FakeTqdm.written = [], []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    return FakeTqdm


def test_the_bar_is_off_when_stderr_is_not_a_terminal(fake_tqdm, capsys):
    for stream in (io.StringIO(), None):  # None: sys.stderr, captured by pytest (not a terminal)
        with progress(10 * THRESHOLD, "copying", file=stream) as bar:
            bar.note("key")
            bar.update(THRESHOLD)
            assert not bar.active
        assert stream is None or stream.getvalue() == ""
    assert fake_tqdm.instances == []
    assert capsys.readouterr().err == ""


def test_the_bar_is_off_below_the_threshold(fake_tqdm):
    with progress(THRESHOLD - 1, "copying", file=FakeTerminal()) as bar:
        assert not bar.active
    assert fake_tqdm.instances == []


def test_the_bar_on_a_terminal(fake_tqdm, capsys):
    terminal = FakeTerminal()
    with progress(THRESHOLD, "copying", file=terminal) as bar:
        assert bar.active
        bar.note("run-3/prices")
        bar.update(THRESHOLD // 2)
        bar.write("a line")
    (made,) = fake_tqdm.instances
    assert made.kw["total"] == THRESHOLD and made.kw["desc"] == "copying" and made.kw["file"] is terminal
    assert made.n == THRESHOLD // 2 and made.postfix == "run-3/prices" and made.closed
    assert fake_tqdm.written == ["a line"] and capsys.readouterr().out == ""


def test_without_tqdm_the_bar_is_silently_off(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` raises ImportError
    with pytest.raises(ImportError):
        import tqdm  # noqa: F401
    with progress(10 * THRESHOLD, "copying", file=FakeTerminal()) as bar:
        assert not bar.active
        bar.note("key")
        bar.update(THRESHOLD)
        bar.write("a line")  # printed as it is
    assert capsys.readouterr() == ("a line\n", "")


def test_a_tqdm_that_fails_leaves_the_bar_off(monkeypatch):
    def broken(**kw: object) -> None:
        raise TypeError("an incompatible tqdm")

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=broken))
    terminal = FakeTerminal()
    with progress(10 * THRESHOLD, "copying", file=terminal) as bar:
        assert not bar.active
        bar.update(THRESHOLD)
    assert terminal.getvalue() == ""


def test_a_large_copy_prints_no_bar_when_stderr_is_a_pipe(file_url, tmp_path):
    src = fs.open(file_url)
    src.save("big", np.zeros(THRESHOLD // 8 + 1), compression="none")  # just over 64 MiB
    # a tqdm that fails loudly if the command line ever makes a bar
    fake = tmp_path / "fake-tqdm"
    fake.mkdir()
    (fake / "tqdm.py").write_text(
        textwrap.dedent(
            """
            import sys
            def tqdm(*args, **kwargs):
                sys.stderr.write("BAR\\n")
                raise SystemExit(3)
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    proc = freight_cli("cp", file_url, str(tmp_path / "dst"), env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines()[-1].startswith("copied 1 value, 64.0 MiB")
