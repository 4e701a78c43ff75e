"""The command line: ``freight inspect`` and ``freight verify`` on real payload files (exit
status, what is printed, where), and usage errors."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight import cli
from freight._freight import _envelope

KEY = b"secret-signing-key"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def files(tmp_path):
    pd = pytest.importorskip("pandas")
    paths = {}

    def write(name, data):
        path = tmp_path / name
        path.write_bytes(data)
        paths[name] = str(path)

    # Files hold payloads at rest: written with frame checksums, as freight.dump writes them.
    write("ints.frt", freight.dumps([1, 2, 3]))
    write("numpy.frt", freight.dumps({"big": np.arange(300_000.0), "small": np.arange(10)}, checksum=True))
    write("pandas.frt", freight.dumps(pd.DataFrame({"a": np.arange(1000), "s": ["x"] * 1000}), checksum=True))
    write(
        "zstd.frt", freight.dumps({"z": np.zeros(100_000), "r": np.arange(10_000)}, compression="zstd", checksum=True)
    )
    write(
        "signed.frt", freight.dumps({"f": lambda x: x, "a": np.arange(100)}, key=KEY, compression="lz4", checksum=True)
    )
    write("no-checksum.frt", freight.dumps(np.arange(1000.0), checksum=False))
    write("garbage.frt", b"this is not a freight payload")
    write("empty.frt", b"")
    write("bad-tree.frt", _envelope(bytes([0x10, 5])))
    blob = bytearray(freight.dumps({"z": np.zeros(100_000), "r": np.arange(10_000)}, compression="zstd"))
    last = freight.inspect(bytes(blob))["frames"][-1]
    blob[last["offset"] + last["stored_length"] // 2] ^= 0xFF
    write("corrupt.frt", bytes(blob))
    (tmp_path / "key").write_bytes(KEY + b"\n")
    (tmp_path / "wrong-key").write_bytes(b"another key\n")
    (tmp_path / "empty-key").write_bytes(b"\n")
    paths.update(
        key=str(tmp_path / "key"), wrong_key=str(tmp_path / "wrong-key"), empty_key=str(tmp_path / "empty-key")
    )
    return paths


def frame_rows(text: str) -> dict[int, str]:
    """The rows of the frame table, by frame index."""
    return {int(m.group(1)): m.group(0) for m in re.finditer(r"^  (\d+)  .*$", text, re.MULTILINE)}


def field(text: str, name: str) -> str:
    match = re.search(rf"^{re.escape(name)}:\s+(.*)$", text, re.MULTILINE)
    assert match, f"no {name!r} line in:\n{text}"
    return match.group(1)


# --------------------------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ints.frt", "numpy.frt", "pandas.frt", "zstd.frt", "signed.frt", "no-checksum.frt"])
def test_inspect_prints_what_freight_inspect_returns(files, capsys, name):
    path = files[name]
    info = freight.inspect(open(path, "rb").read())
    rc, out, err = run(capsys, "inspect", path)
    assert rc == 0 and err == ""
    assert field(out, "file") == path
    assert field(out, "format version") == str(info["format_version"])
    assert f"{info['total_length']:,} bytes" in field(out, "payload size") or info["total_length"] < 1024
    assert field(out, "flags") == (", ".join(info["flags"]) or "(none)")
    assert field(out, "needs pickle").startswith("yes" if info["needs_pickle"] else "no")
    assert field(out, "serializer tags") == (", ".join(info["tags"]) or "(none)")
    for library, version in info["producer"].items():
        assert f"{library} {version}" in field(out, "producer")
    rows = frame_rows(out)
    assert sorted(rows) == [f["index"] for f in info["frames"]]
    for f in info["frames"]:
        row = rows[f["index"]]
        assert (f["checksum"] or "-") in row
        assert row.endswith("ok" if f["checksum_ok"] else "no checksum")
        if f["codec"] != "none":
            assert f["codec"] in row
    tree = info["tree"]
    assert field(out, "node tree").startswith(f"{tree['nodes']:,} nodes, depth {tree['max_depth']:,}")
    for kind, count in tree["node_tags"].items():
        assert f"{kind} {count}" in field(out, "  node kinds")


def _table_header(text: str) -> list[str]:
    return next(line for line in text.splitlines() if line.lstrip().startswith("#")).split()


def test_inspect_shows_compression_columns_only_when_a_frame_is_compressed(files, capsys):
    _, plain, _ = run(capsys, "inspect", files["numpy.frt"])
    _, packed, _ = run(capsys, "inspect", files["zstd.frt"])
    assert "codec" not in plain and "ratio" not in plain
    assert _table_header(packed) == ["#", "offset", "size", "stored", "ratio", "codec", "shuffle", "checksum", "status"]
    # 2.3 MiB: sealed by xxh3 digests of 64 KiB blocks (format 1.2) instead of a checksum; the
    # small frame beside it keeps its checksum.
    assert _table_header(plain) == ["#", "offset", "size", "checksum", "digests", "status"]
    rows = frame_rows(plain)
    assert "xxh3 / 64.0 KiB" in rows[0] and rows[0].endswith("ok")
    assert rows[1].split()[-2:] == ["-", "ok"]


def test_inspect_shows_the_digests_of_a_signed_payload_and_a_changed_block(files, capsys, tmp_path):
    _, out, _ = run(capsys, "inspect", files["signed.frt"])
    assert _table_header(out)[-3:] == ["checksum", "digests", "status"]
    assert all("sha256 / 256.0 KiB" in row and row.endswith("ok") for row in frame_rows(out).values())
    data = bytearray(open(files["numpy.frt"], "rb").read())
    frame = freight.inspect(bytes(data))["frames"][0]
    data[frame["offset"] + 3 * 65536 + 1] ^= 1  # in block 3
    path = tmp_path / "flipped.frt"
    path.write_bytes(bytes(data))
    rc, out, _ = run(capsys, "inspect", str(path))
    assert rc == 0 and frame_rows(out)[0].endswith("MISMATCH") and frame_rows(out)[1].endswith("ok")


def test_the_frame_table_of_a_frame_list_has_no_offsets():
    parts = freight.dumps_frames({"a": np.arange(1000.0), "b": np.arange(10)}, checksum=True)
    text = cli.format_inspect(freight.inspect(parts))
    header = next(line for line in text.splitlines() if line.lstrip().startswith("#"))
    assert header.split() == ["#", "size", "checksum", "status"]
    assert sorted(frame_rows(text)) == [0, 1] and "file:" not in text


def test_inspect_reports_the_signature_with_and_without_a_key(files, capsys):
    assert field(run(capsys, "inspect", files["signed.frt"])[1], "signed") == "yes (not checked: pass --key-file)"
    rc, out, _ = run(capsys, "inspect", files["signed.frt"], "--key-file", files["key"])
    assert rc == 0 and field(out, "signed") == "yes, signature ok"
    rc, out, _ = run(capsys, "inspect", files["signed.frt"], "--key-file", files["wrong_key"])
    assert rc == 0 and field(out, "signed") == "yes, signature DOES NOT MATCH the key"
    assert field(run(capsys, "inspect", files["ints.frt"])[1], "signed") == "no"


def test_inspect_says_what_loading_runs(capsys, tmp_path):
    import fractions

    k = 2
    for name, value, says in (
        ("fn.frt", lambda: k, "yes (loading runs code (a function made at run time, no pickle)"),
        ("fraction.frt", fractions.Fraction(1, 2), "yes (loading runs pickle"),
        ("ints.frt", [1, 2], "no"),
    ):
        path = tmp_path / name
        path.write_bytes(freight.dumps(value))
        assert field(run(capsys, "inspect", str(path))[1], "needs pickle").startswith(says)


def test_inspect_shows_a_bad_checksum_and_a_malformed_tree(files, capsys):
    rc, out, _ = run(capsys, "inspect", files["corrupt.frt"])
    rows = frame_rows(out)
    assert rc == 0 and rows[0].endswith("ok") and rows[1].endswith("MISMATCH")
    rc, out, _ = run(capsys, "inspect", files["bad-tree.frt"])
    assert rc == 0 and field(out, "node tree").startswith("MALFORMED") and "5 items" in out


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # One sentence, the first bytes as bytes and hex (issue 23: not a list of ints).
        (
            "garbage.frt",
            "not a freight payload: it starts with b'this' (hex 74 68 69 73), where every freight payload "
            "starts with the magic bytes b'\\x89FRT' (hex 89 46 52 54)",
        ),
        ("empty.frt", "empty file, not a freight payload"),
    ],
)
def test_inspect_of_a_file_that_is_not_a_payload_fails(files, capsys, name, message):
    rc, out, err = run(capsys, "inspect", files[name])
    assert rc == 1 and out == ""
    assert err == f"freight inspect: {files[name]}: {message}\n"


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------


def test_verify_ok_counts_the_checked_frames(files, capsys):
    rc, out, err = run(capsys, "verify", files["pandas.frt"])
    n = len(freight.inspect(open(files["pandas.frt"], "rb").read())["frames"])
    assert rc == 0 and err == ""
    assert out == f"{files['pandas.frt']}: OK (header and node tree ok, {n} frame checksums ok)\n"
    assert run(capsys, "verify", files["ints.frt"])[1].endswith("(header and node tree ok, no frames)\n")
    rc, out, _ = run(capsys, "verify", files["no-checksum.frt"])
    assert rc == 0 and "1 frame without a checksum (not verifiable)" in out


def test_verify_with_a_key_checks_the_signature(files, capsys):
    rc, out, _ = run(capsys, "verify", files["signed.frt"], "--key-file", files["key"])
    assert rc == 0 and out.rstrip().endswith(", signature ok)")
    rc, out, err = run(capsys, "verify", files["signed.frt"], "--key-file", files["wrong_key"])
    assert rc == 1 and out == "" and f"{files['signed.frt']}: FAILED: " in err
    rc, _, err = run(capsys, "verify", files["ints.frt"], "--key-file", files["key"])
    assert rc == 1 and "not signed" in err


def _verify(*argv: str) -> subprocess.CompletedProcess:
    """``python -m freight verify ARGV``, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "freight", "verify", *argv], capture_output=True, text=True, timeout=300
    )


def test_verify_without_a_key_says_the_signature_was_not_checked(files):
    """Issue 30: ``verify signed.frt`` printed OK and said nothing of the signature it did not check."""
    proc = _verify(files["signed.frt"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith(f"{files['signed.frt']}: OK (header and node tree ok, ")
    assert proc.stdout.rstrip().endswith(
        ", signed, but the signature was NOT checked: pass --key-file PATH to check it)"
    ), proc.stdout
    # Unsigned payloads have no signature to mention; with the key it is checked.
    assert "signature" not in _verify(files["numpy.frt"]).stdout
    proc = _verify(files["signed.frt"], "--key-file", files["key"])
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith(", signature ok)") and "NOT" not in proc.stdout


def test_require_signature_fails_unless_a_signature_was_checked(files):
    proc = _verify(files["signed.frt"], "--require-signature")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        f"{files['signed.frt']}: FAILED: it is signed, but the signature was not checked; --require-signature "
        "needs the key to check it with: --key-file PATH\n"
    )
    proc = _verify(files["numpy.frt"], "--require-signature")
    assert proc.returncode == 1 and proc.stderr.startswith(f"{files['numpy.frt']}: FAILED: it is not signed; ")
    proc = _verify(files["signed.frt"], "--require-signature", "--key-file", files["key"])
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith(", signature ok)"), proc.stderr
    for name, key in (("signed.frt", "wrong_key"), ("numpy.frt", "key")):  # a wrong key, no signature
        proc = _verify(files[name], "--require-signature", "--key-file", files[key])
        assert proc.returncode == 1 and f"{files[name]}: FAILED: " in proc.stderr


def test_verify_of_a_corrupted_frame_fails_and_shows_which_frame(files, capsys):
    rc, out, err = run(capsys, "verify", files["corrupt.frt"])
    assert rc == 1 and out == ""
    first, *table = err.splitlines()
    assert first.startswith(f"{files['corrupt.frt']}: FAILED: ") and "frame 1" in first
    rows = frame_rows("\n".join(table))
    assert rows[0].endswith("ok") and rows[1].endswith("MISMATCH")


@pytest.mark.parametrize(("name", "message"), [("bad-tree.frt", "5 items"), ("garbage.frt", "magic")])
def test_verify_of_a_malformed_payload_fails_with_the_reason(files, capsys, name, message):
    rc, out, err = run(capsys, "verify", files[name])
    assert rc == 1 and out == ""
    assert err.startswith(f"{files[name]}: FAILED: ") and message in err
    assert frame_rows(err) == {}  # no frames to show


def test_missing_files_and_bad_key_files_are_errors(files, capsys, tmp_path):
    missing = str(tmp_path / "missing.frt")
    for command in ("inspect", "verify"):
        rc, _, err = run(capsys, command, missing)
        assert rc == 1 and err == f"freight {command}: {missing}: no such file; check the path\n"
        rc, _, err = run(capsys, command, files["ints.frt"], "--key-file", files["empty_key"])
        assert rc == 1 and "the key file is empty" in err
        rc, _, err = run(capsys, command, files["ints.frt"], "--key-file", missing)
        assert rc == 1 and "No such file or directory" in err


def test_usage_errors_exit_with_status_2(capsys):
    assert cli.main([]) == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["inspect"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["verify", "a.frt", "--unknown"])
    assert info.value.code == 2


def test_python_dash_m_freight_exits_with_the_commands_status(files):
    for name, status in (("numpy.frt", 0), ("corrupt.frt", 1)):
        proc = subprocess.run(
            [sys.executable, "-m", "freight", "verify", files[name]], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == status, proc.stderr
