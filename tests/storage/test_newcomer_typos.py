"""Issue 23, "typos create state": opening a store and reading from it never creates anything;
a URL of an unknown or miswritten scheme is an error naming the schemes freight knows; the
command line's read-only commands refuse a folder that does not exist; an ``http://`` endpoint
without ``allow_http=True`` is refused when the store is opened, naming that keyword."""

from __future__ import annotations

import os

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight import cli

KNOWN = "freight knows file://PATH (or a plain path), memory:// and s3://BUCKET/PREFIX"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------------------------
# A store whose folder does not exist
# --------------------------------------------------------------------------------------------


def test_reading_a_store_whose_folder_does_not_exist_creates_nothing(tmp_path):
    folder = tmp_path / "does-not-exist"
    store = fs.open(str(folder))
    assert store.url == f"file://{folder}" and store.backend == "file"
    assert store.list() == [] and list(store) == [] and len(store) == 0
    assert not store.exists("k") and "k" not in store
    for read in (store.load, store.info, store.delete, lambda k: store.load(k, mmap=True)):
        with pytest.raises(freight.KeyNotFoundError) as info:
            read("k")
        assert str(info.value) == (
            f'file://{folder}: no value is stored under "k": the folder {folder} does not exist '
            "(a store's folder is created by its first save; check the path)"
        )
    assert store.delete_prefix("run-3/") == 0
    assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_the_first_save_creates_the_folder(tmp_path):
    folder = tmp_path / "a" / "b"
    store = fs.open(folder)
    assert not (tmp_path / "a").exists()
    store.save("run-3/x", np.arange(3))
    assert folder.is_dir() and store.list() == ["run-3/x"]
    assert np.array_equal(store.load("run-3/x"), np.arange(3))
    assert store.url == fs.open(folder).url == f"file://{folder.resolve()}"


def test_a_folder_made_after_opening_is_read(tmp_path):
    reader = fs.open(tmp_path / "shared")
    assert reader.list() == []
    fs.open(tmp_path / "shared").save("k", 1)  # another writer creates it
    assert reader.list() == ["k"] and reader.load("k") == 1


def test_a_file_in_the_way_is_refused_when_opening(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    for path in (tmp_path / "file", tmp_path / "file" / "store"):
        with pytest.raises(freight.StorageError, match=f"cannot create the folder .*: {tmp_path / 'file'} is a file"):
            fs.open(str(path))


# --------------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("s3:/bucket", 'malformed URL; did you mean "s3://bucket"?'),
        ("s3:bucket/prefix", 'malformed URL; did you mean "s3://bucket/prefix"?'),
        ("file:/data/results", 'malformed URL; did you mean "file:///data/results"?'),
        ("memory:", 'malformed URL; did you mean "memory://"?'),
        ("S3://bucket", 'did you mean "s3://bucket"?'),
        ("gs://bucket", "unknown scheme 'gs'; "),
        ("fil://results", "unknown scheme 'fil'; did you mean file://? "),
        ("http://host/x", "unknown scheme 'http'; "),
    ],
)
def test_a_url_of_an_unknown_or_miswritten_scheme_is_an_error(tmp_path, monkeypatch, url, says):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(freight.StorageError) as info:
        fs.open(url)
    message = str(info.value)
    assert message.startswith(f'cannot open store "{url}": {says}') and KNOWN in message
    assert os.listdir(tmp_path) == []  # no folder named after the typo


def test_a_folder_whose_name_reads_as_a_scheme(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(freight.StorageError) as info:
        fs.open("results:v2")
    assert 'write "./results:v2" or "file://results:v2"' in str(info.value)
    for url in ("./results:v2", "file://results:v2", tmp_path / "results:v2"):  # the ways to name it
        fs.open(url).save("k", str(url))
    assert os.listdir(tmp_path) == ["results:v2"]
    assert fs.open(tmp_path / "results:v2").load("k") == str(tmp_path / "results:v2")


def test_the_command_line_refuses_a_miswritten_url(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, "ls", "s3:/bucket")
    assert rc == 1 and out == ""
    assert err.startswith('freight ls: cannot open store "s3:/bucket": malformed URL; did you mean "s3://bucket"?')
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------
# The command line on a folder that does not exist
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["ls", "{url}"],
        ["ls", "{url}", "run-3/", "-l"],
        ["cat", "{url}", "k"],
        ["inspect", "{url}", "k"],
        ["verify", "{url}", "k"],
        ["rm", "{url}", "k"],
        ["rm", "{url}", "--prefix", "run-3/"],
        ["cp", "{url}", "{other}"],
    ],
)
def test_read_only_commands_refuse_a_folder_that_does_not_exist(capsys, tmp_path, argv):
    url = str(tmp_path / "does-not-exist")
    argv = [a.format(url=url, other=tmp_path / "other") for a in argv]
    rc, out, err = run(capsys, *argv)
    assert rc == 1 and out == ""
    assert err == (
        f"freight {argv[0]}: {url}: there is no folder {url}: nothing was ever saved there (a store's "
        "folder is created by its first save); check the path\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_cp_creates_its_destination(capsys, tmp_path):
    fs.open(tmp_path / "src").save("k", [1, 2])
    rc, out, err = run(capsys, "cp", str(tmp_path / "src"), str(tmp_path / "new" / "dst"))
    assert rc == 0 and err == "" and out.startswith("  ")
    assert fs.open(tmp_path / "new" / "dst").load("k") == [1, 2]


# --------------------------------------------------------------------------------------------
# S3 over http://
# --------------------------------------------------------------------------------------------


@pytest.fixture
def no_aws_env(monkeypatch):
    for name in ("AWS_ALLOW_HTTP", "AWS_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


S3_KEYWORDS = dict(region="us-east-1", access_key_id="id", secret_access_key="secret")


def test_an_http_endpoint_without_allow_http_names_the_keyword(no_aws_env):
    with pytest.raises(freight.StorageError) as info:
        fs.open("s3://bucket/p", endpoint_url="http://127.0.0.1:9000", **S3_KEYWORDS)
    assert str(info.value) == (
        'cannot open store "s3://bucket/p": endpoint_url http://127.0.0.1:9000 is plain http, refused by '
        "default; pass allow_http=True to freight.storage.open (or use an https:// endpoint)"
    )
    store = fs.open("s3://bucket/p", endpoint_url="http://127.0.0.1:9000", allow_http=True, **S3_KEYWORDS)
    assert store.backend == "s3"  # opening contacts nothing
    fs.open("s3://bucket/p", endpoint_url="https://s3.example", **S3_KEYWORDS)


def test_an_http_endpoint_from_the_environment_names_the_variable(no_aws_env):
    no_aws_env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    with pytest.raises(freight.StorageError, match="AWS_ENDPOINT_URL http://127.0.0.1:9000 is plain http") as info:
        fs.open("s3://bucket/p", **S3_KEYWORDS)
    assert "set AWS_ALLOW_HTTP=true, or pass allow_http=True" in str(info.value)
    no_aws_env.setenv("AWS_ALLOW_HTTP", "true")
    assert fs.open("s3://bucket/p", **S3_KEYWORDS).backend == "s3"
