"""Issue 23, "errors in internal words": a misspelled option is an ``OptionError`` (a
``FreightError`` and a ``TypeError``) naming the public function and the closest option; a
missing payload file is a ``PathNotFoundError`` (a ``FreightError`` and a ``FileNotFoundError``);
the command line says in one sentence why a file is not a payload, and reads a stored value by
``URL KEY`` as ``cat`` does, so keys whose file names are percent-encoded need no guessing."""

from __future__ import annotations

import errno
import os
import pickle

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight import cli


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def test_option_error_is_a_freight_error_and_a_type_error():
    assert issubclass(freight.OptionError, freight.FreightError)
    assert issubclass(freight.OptionError, TypeError)
    assert "OptionError" in freight.__all__


def test_a_misspelled_freight_option_names_freight_and_the_option_meant():
    with pytest.raises(freight.OptionError) as info:
        freight.Freight(alow_pickle=False)
    assert str(info.value) == (
        "freight.Freight() got an unexpected keyword argument 'alow_pickle'; did you mean 'allow_pickle'?"
    )
    with pytest.raises(freight.OptionError, match=r"'colour'; its options are allow_pickle, allowed_tags, .*zero_copy"):
        freight.Freight(colour="red")


def test_a_wrong_value_is_not_reported_as_an_unknown_option():
    with pytest.raises(freight.OptionError, match="compression must be"):
        freight.Freight(compression=42)
    with pytest.raises(freight.OptionError, match="max_size= takes a whole number") as info:
        freight.Freight(max_size="large")
    assert "unexpected keyword" not in str(info.value)
    for call in (lambda: freight.dumps(1, checksum="yes"), lambda: freight.loads(freight.dumps(1), zero_copy="no")):
        with pytest.raises(freight.OptionError, match="takes True or False"):
            call()
    with pytest.raises(freight.OptionError, match="a key must be bytes"):
        freight.loads(freight.dumps(1), key="text")


def test_freight_keeps_its_signature_and_pickles():
    import inspect

    assert "allow_pickle" in inspect.signature(freight.Freight).parameters
    f = pickle.loads(pickle.dumps(freight.Freight(compression="lz4", allow_pickle=False)))
    assert f._options["compression"] == "lz4" and f._options["allow_pickle"] is False


@pytest.mark.parametrize(
    ("call", "public", "given", "meant"),
    [
        (lambda p: freight.load(p, zero_cpy=True), "freight.load", "zero_cpy", "zero_copy"),
        (lambda p: freight.load(p, map=True), "freight.load", "map", "mmap"),
        (lambda p: freight.Freight().load(p, verfy=False), "Freight.load", "verfy", "verify"),
        (lambda p: freight.dump(1, p, compresion="lz4"), "freight.dump", "compresion", "compression"),
        (lambda p: freight.inspect(b"", kye=b"k"), "freight.inspect", "kye", "key"),
        (lambda p: freight.verify(b"", kye=b"k"), "freight.verify", "kye", "key"),
        (lambda p: freight.register(object(), tipes=(int,)), "freight.register", "tipes", "types"),
        (lambda p: fs.open("memory://", alow_http=True), "freight.storage.open", "alow_http", "allow_http"),
        (lambda p: fs.open("memory://").save("k", 1, if_abscent=True), "Store.save", "if_abscent", "if_absent"),
    ],
)
def test_misspelled_options_of_the_python_functions(tmp_path, call, public, given, meant):
    path = tmp_path / "v.frt"
    freight.dump([1], path)
    with pytest.raises(freight.OptionError) as info:
        call(path)
    assert str(info.value) == f"{public}() got an unexpected keyword argument {given!r}; did you mean {meant!r}?"


def test_a_misspelled_option_of_store_load():
    store = fs.open("memory://")
    store.save("k", np.arange(3))
    with pytest.raises(freight.OptionError) as info:
        store.load("k", alow_pickle=False)
    assert (
        str(info.value) == "Store.load() got an unexpected keyword argument 'alow_pickle'; did you mean 'allow_pickle'?"
    )


def test_a_type_error_raised_inside_a_serializer_is_not_an_option_error(tmp_path):
    class Boom:
        tag = "test.Boom"
        types = (complex,)  # a type encoded natively: the registration overrides it

        def serialize(self, obj):
            raise TypeError("the serializer's own error")

        def deserialize(self, meta, frames):
            return None

    f = freight.Freight()
    f.register(Boom())
    with pytest.raises(TypeError, match="the serializer's own error") as info:
        f.dump(1j, tmp_path / "x.frt")
    assert not isinstance(info.value, freight.OptionError)


@pytest.mark.parametrize(
    ("call", "public", "given", "meant"),
    [
        (lambda: freight.loads(freight.dumps(1), zero_cpy=True), "freight.loads", "zero_cpy", "zero_copy"),
        (lambda: freight.dumps(1, chksum=True), "freight.dumps", "chksum", "checksum"),
        (lambda: freight.loads_frames(freight.dumps_frames(1), alow_pickle=0), "freight.loads_frames", "alow_pickle",
         "allow_pickle"),
        (lambda: freight.dumps_frames(1, compresion="lz4"), "freight.dumps_frames", "compresion", "compression"),
        (lambda: freight.Freight().loads(freight.dumps(1), zero_cpy=True), "Freight.loads", "zero_cpy", "zero_copy"),
        (lambda: freight.Freight().dumps(1, **{"check" + "sum": True, "kee": b"k"}), "Freight.dumps", "kee", "key"),
    ],
)  # fmt: skip
def test_a_misspelled_option_of_the_codec_functions_names_the_public_name(call, public, given, meant):
    """The codec's methods are the Rust ones (no Python frame): their one parsing step
    (crates/freight-py/src/call_options.rs) raises the OptionError itself."""
    with pytest.raises(freight.OptionError) as info:
        call()
    assert str(info.value) == f"{public}() got an unexpected keyword argument {given!r}; did you mean {meant!r}?"


def test_a_codec_option_the_method_does_not_take_is_an_option_error():
    with pytest.raises(freight.OptionError, match=r"freight.dumps\(\) got an unexpected keyword argument 'zero_copy'"):
        freight.dumps(1, zero_copy=True)
    with pytest.raises(freight.OptionError, match=r"loads\(\) .* 'colour'; its options are allow_pickle, allowed_tags"):
        freight.loads(freight.dumps(1), colour="red")
    with pytest.raises(TypeError, match=r"loads\(\) missing 1 required positional argument: 'data'"):
        freight.loads()
    with pytest.raises(TypeError, match=r"dumps\(\) takes 1 positional argument but 2 were given"):
        freight.dumps(1, 2)


def test_a_codec_option_passed_as_none_takes_the_codecs_setting():
    f = freight.Freight(compression="lz4", zero_copy=True)
    value = bytearray(1 << 20)
    assert freight.inspect(f.dumps(value, compression=None, checksum=None, key=None))["frames"][0]["codec"] == "lz4"
    data = f.dumps(1)
    assert f.loads(data, allow_pickle=None, zero_copy=None, verify=None, key=None, max_size=None, copy=None) == 1


def test_a_codec_option_passed_by_a_name_built_at_run_time_is_taken():
    """Names written in source are interned (compared by pointer); one built at run time is
    compared by value."""
    name = "".join(["zero", "_copy"])
    assert freight.loads(freight.dumps(1), **{name: False}) == 1
    with pytest.raises(freight.OptionError, match="zero_copy= takes True or False"):
        freight.loads(freight.dumps(1), **{name: "no"})


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def test_a_missing_file_is_a_freight_error_and_a_file_not_found_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(freight.PathNotFoundError) as info:
        freight.load("nope.frt")
    error = info.value
    assert isinstance(error, freight.FreightError) and isinstance(error, freight.StorageError)
    assert isinstance(error, FileNotFoundError) and error.errno == errno.ENOENT and error.filename == "nope.frt"
    assert str(error) == "nope.frt: no such file; check the path"


def test_dump_into_a_missing_folder_and_load_of_a_folder(tmp_path):
    with pytest.raises(freight.PathNotFoundError) as info:
        freight.dump(1, tmp_path / "missing" / "v.frt")
    folder = tmp_path / "missing"
    says = f"cannot write it: the folder {folder} does not exist; create it first"
    assert str(info.value) == f"{folder / 'v.frt'}: {says}"
    assert list(tmp_path.iterdir()) == []  # no temporary file left
    with pytest.raises(freight.PathError, match=r"is a folder, not a payload file .*freight.storage.open") as info:
        freight.load(tmp_path)
    assert isinstance(info.value, OSError)


def test_loading_a_key_by_the_path_it_suggests_names_the_file_that_holds_it(tmp_path):
    store = fs.open(tmp_path / "results")
    store.save("run-3/_t.<locals>.s_0", [1, 2])
    encoded = tmp_path / "results" / "run-3" / "_t.%3Clocals%3E.s_0"
    assert encoded.is_file()  # how a local store keeps such a key
    with pytest.raises(freight.PathNotFoundError) as info:
        freight.load(tmp_path / "results" / "run-3" / "_t.<locals>.s_0")
    assert f"a store keeps this value in the file {encoded}" in str(info.value)
    assert freight.load(encoded) == [1, 2]


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\x00\x01\x02\x03rest", "it starts with b'\\x00\\x01\\x02\\x03' (hex 00 01 02 03)"),
        (b"PK\x03\x04 a zip", "it starts with b'PK\\x03\\x04' (hex 50 4b 03 04)"),
        (b"\x89F", "it is only 2 bytes long"),
    ],
)
def test_a_file_that_is_not_a_payload_is_one_sentence(capsys, tmp_path, content, says):
    path = tmp_path / "garbage.bin"
    path.write_bytes(content)
    rc, out, err = run(capsys, "inspect", str(path))
    assert rc == 1 and out == ""
    assert err.startswith(f"freight inspect: {path}: not a freight payload: {says}") and err.count("\n") == 1
    assert "[" not in err  # no list of ints
    rc, out, err = run(capsys, "verify", str(path))
    assert rc == 1 and err.startswith(f"{path}: FAILED: not a freight payload: {says}")


def test_inspect_and_verify_take_a_store_and_a_key(capsys, tmp_path):
    url = str(tmp_path / "results")
    key = "run-3/_t.<locals>.s_0"
    store = fs.open(url)
    store.save(key, {"x": np.arange(1000.0)})
    rc, out, err = run(capsys, "inspect", url, key)
    assert rc == 0 and err == ""
    assert f"store:           {store.url}\nkey:             {key}\n" in out and "frames:          1" in out
    rc, out, err = run(capsys, "verify", url, key)
    assert rc == 0 and out == f'{store.url}: "{key}": OK (header and node tree ok, 1 frame checksum ok)\n'
    rc, out, err = run(capsys, "verify", url, "missing")
    assert rc == 1 and err == f'freight verify: {store.url}: no value is stored under "missing"\n'
    path = os.path.join(url, "run-3", "_t.%3Clocals%3E.s_0")  # the file, by its name on disk
    assert run(capsys, "verify", path)[0] == 0


def test_max_size_true_is_not_a_one_byte_limit():
    with pytest.raises(freight.OptionError, match="max_size= takes a whole number of bytes"):
        freight.loads(freight.dumps(1), max_size=True)
