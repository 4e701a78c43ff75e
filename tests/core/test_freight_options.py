"""``Freight.options`` (a read-only, normalised, hashable view of the constructor options),
``Freight.__eq__``/``__hash__`` (equal options over the same registry layer) and
``Freight.replace`` (other options, the same layer)."""

from __future__ import annotations

import copy
import pickle

import cloudpickle
import numpy as np
import pytest

import freight
from freight import _api
from freight._api import FreightOptions
from freight.registry import GLOBAL, Registry

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


# --- the view -------------------------------------------------------------------------------------


def test_options_are_the_constructor_options():
    f = freight.Freight(allow_pickle=False, zero_copy=True, verify=True, checksum=True, compression="lz4",
                        key=KEY, max_size=1 << 20, allowed_tags=["pickle"], strict_versions=True)  # fmt: skip
    assert f.options == FreightOptions(
        allow_pickle=False,
        zero_copy=True,
        verify=True,
        checksum=True,
        compression="lz4",
        key=KEY,
        max_size=1 << 20,
        allowed_tags=("pickle",),
        strict_versions=True,
    )
    assert freight.Freight().options == FreightOptions()
    assert _api._DEFAULT.options == FreightOptions()


def test_options_are_read_only():
    f = freight.Freight(compression="lz4")
    with pytest.raises(AttributeError, match="read-only"):
        f.options.compression = "zstd"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del f.options.key
    with pytest.raises(AttributeError):
        f.options.other = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        f.options = FreightOptions()  # type: ignore[misc]
    as_dict = f.options.as_dict()
    as_dict["compression"] = "zstd"
    assert f.options.compression == "lz4"
    # The options it encodes with did not change either.
    assert freight.inspect(f.dumps(np.zeros(100_000)))["frames"][0]["codec"] == "lz4"


def test_as_dict_builds_an_equal_instance():
    f = freight.Freight(compression=("zstd", 9), key=[KEY, OTHER_KEY], allowed_tags=["b", "a"], registry=GLOBAL)
    assert freight.Freight(registry=GLOBAL, **f.options.as_dict()) == f
    assert list(f.options.as_dict()) == list(FreightOptions.NAMES)


def test_repr_never_shows_the_key():
    f = freight.Freight(key=KEY, compression="lz4")
    for text in (repr(f), repr(f.options), str(f.options)):
        assert repr(KEY) not in text and "kkkk" not in text
        assert "key=<set>" in text
    assert "compression='lz4'" in repr(f)
    assert "allow_pickle" not in repr(f)  # only what differs from Freight()


def test_options_are_hashable():
    assert len({freight.Freight(compression=c).options for c in (None, "none", "lz4", ("lz4", 1))}) == 2
    hash(freight.Freight(key=[KEY, OTHER_KEY], allowed_tags=["x"]).options)


# --- normalisation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        (None, None),
        ("none", None),
        ("lz4", "lz4"),
        (("lz4", 5), "lz4"),
        ("zstd", "zstd"),
        (("zstd", 3), "zstd"),
        (("zstd", 9), ("zstd", 9)),
        (("zstd", -1), ("zstd", -1)),
        ("auto", "auto"),
        (("auto", 1e9), "auto"),
        (("auto", 1_000_000_000), "auto"),
        (("auto", 1e8), ("auto", 100_000_000)),
        (("auto", 100_000_000.7), ("auto", 100_000_000)),
    ],
)
def test_compression_has_one_spelling_per_behaviour(given, normal):
    assert freight.Freight(compression=given).options.compression == normal
    assert FreightOptions(compression=given).compression == normal


def test_equal_spellings_make_the_same_bytes():
    value = {"a": np.zeros(300_000), "b": "x" * 2_000_000}
    for a, b in (
        (("zstd", 3), "zstd"),
        (("auto", 1e9), "auto"),
        ("none", None),
        (("auto", 1e8), ("auto", 100_000_000)),
    ):
        fa, fb = freight.Freight(compression=a, registry=GLOBAL), freight.Freight(compression=b, registry=GLOBAL)
        assert fa == fb and hash(fa) == hash(fb)
        assert fa.dumps(value) == fb.dumps(value)


def test_other_options_normalised():
    f = freight.Freight(key=[KEY], allowed_tags=["b", "a", "b"], max_size=16 << 30)
    assert f.options.key == KEY  # one key in a list is that key
    assert f.options.allowed_tags == ("a", "b")  # a set: order and repeats mean nothing
    assert f.options.max_size is None  # the default, given
    assert freight.Freight(key=bytearray(KEY)).options.key == KEY
    assert freight.Freight(key=(KEY, memoryview(OTHER_KEY))).options.key == (KEY, OTHER_KEY)
    assert freight.Freight(allowed_tags=iter(["x"])).options.allowed_tags == ("x",)
    assert freight.Freight(allowed_tags=[]).options.allowed_tags == ()
    # Different behaviour stays different.
    assert freight.Freight(key=[KEY, OTHER_KEY]).options != freight.Freight(key=[OTHER_KEY, KEY]).options
    assert freight.Freight(verify=None).options != freight.Freight(verify=True).options
    assert freight.Freight(allowed_tags=[]).options != freight.Freight().options


def test_a_string_of_tags_is_refused():
    # Read as a list of letters it would refuse every real tag.
    with pytest.raises(freight.FreightError, match="allowed_tags"):
        freight.Freight(allowed_tags="pickle")  # type: ignore[arg-type]
    with pytest.raises(freight.OptionError, match="allowed_tags"):
        FreightOptions(allowed_tags="pickle")  # type: ignore[arg-type]


def test_bad_values_are_still_refused_by_the_codec():
    with pytest.raises(freight.FreightError):
        freight.Freight(compression="no-such-codec")
    with pytest.raises(freight.FreightError):
        freight.Freight(compression=("zstd", 99))
    with pytest.raises(freight.FreightError):
        freight.Freight(key=[])


@pytest.mark.parametrize(
    ("name", "default"),
    [("allow_pickle", True), ("zero_copy", False), ("checksum", False), ("strict_versions", False)],
)
def test_a_yes_no_option_left_as_none_is_its_default(name, default):
    # As the codec reads it: Freight(allow_pickle=None) allows pickle, and so does its copy.
    f = freight.Freight(**{name: None})
    assert getattr(f.options, name) is default
    assert f.options == freight.Freight().options == FreightOptions(**{name: None})
    copy_ = pickle.loads(pickle.dumps(f))
    assert getattr(copy_.options, name) is default
    if name == "allow_pickle":
        assert copy_.loads(f.dumps(Registry)) is Registry  # a class: pickled by name
    assert freight.Freight(**{name: np.bool_(not default)}).options == freight.Freight(**{name: not default}).options
    assert freight.Freight(verify=None).options.verify is None
    assert freight.Freight(verify=np.bool_(False)).options.verify is False


@pytest.mark.parametrize("name", ["allow_pickle", "zero_copy", "verify", "checksum", "strict_versions"])
@pytest.mark.parametrize("value", ["false", 0, 1, [], "yes"])
def test_a_yes_no_option_of_another_kind_is_an_option_error(name, value):
    # Not a truth value read from it: "false" would mean True.
    words = f"{name}= takes True or False; got {value!r}"
    for make in (
        lambda: freight.Freight(**{name: value}),
        lambda: FreightOptions(**{name: value}),
        lambda: freight.Freight().replace(**{name: value}),
        lambda: FreightOptions().replace(**{name: value}),
    ):
        with pytest.raises(freight.OptionError) as info:
            make()
        assert str(info.value) == words


@pytest.mark.parametrize("tags", [5, 1.5, [1], ["a", None], object()])
def test_tags_of_another_kind_are_an_option_error(tags):
    words = 'allowed_tags must be None or a list of serializer tags (strings; "pickle" for pickle)'
    for make in (
        lambda: freight.Freight(allowed_tags=tags),
        lambda: freight.Freight().replace(allowed_tags=tags),
        lambda: FreightOptions(allowed_tags=tags),
    ):
        with pytest.raises(freight.OptionError) as info:
            make()
        assert str(info.value) == words


@pytest.mark.parametrize(
    ("max_size", "words"),
    [
        (True, "max_size= takes a whole number of bytes (or None for the default bound); got a bool"),
        ("5", "max_size= takes a whole number of bytes (or None for the default bound); got '5'"),
        (1.5, "max_size= takes a whole number of bytes (or None for the default bound); got 1.5"),
        (-1, "max_size must be a number of bytes from 0 to 2**64-1 (the largest frame loads accepts); got -1"),
    ],
)
def test_options_check_max_size_as_the_codec_does(max_size, words):
    for make in (lambda: FreightOptions(max_size=max_size), lambda: FreightOptions().replace(max_size=max_size)):
        with pytest.raises(freight.OptionError) as info:
            make()
        assert str(info.value) == words
    assert FreightOptions(max_size=np.int64(5)).max_size == 5 and FreightOptions(max_size=0).max_size == 0


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (5, "a key must be bytes"),  # bytes(5) would be five zero bytes
        (True, "a key must be bytes"),
        ([5], "a key must be bytes"),
        ("secret", "a key must be bytes"),
        (b"", "an empty key signs nothing"),
        ([], "key= got an empty list of keys"),
    ],
)
def test_options_check_keys_as_the_codec_does(key, words):
    for make in (lambda: FreightOptions(key=key), lambda: FreightOptions().replace(key=key)):
        with pytest.raises(freight.OptionError, match=words):
            make()
    with pytest.raises(freight.OptionError, match=words):
        freight.Freight(key=key)


# --- equality and hash ----------------------------------------------------------------------------


def test_equal_by_options_and_registry_layer():
    layer = Registry(parent=GLOBAL)
    a = freight.Freight(allow_pickle=False, registry=layer)
    b = freight.Freight(allow_pickle=False, registry=layer)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != freight.Freight(allow_pickle=True, registry=layer)
    # Two layers are two registries, even with the same serializers: either may change.
    assert freight.Freight() != freight.Freight()
    assert a != freight.Freight(allow_pickle=False)
    assert _api._DEFAULT == freight.Freight(registry=GLOBAL)
    assert _api._DEFAULT == freight.Freight(registry=GLOBAL, allow_pickle=True, compression="none", max_size=16 << 30)
    assert a != object() and (a == 1) is False


def test_hash_does_not_change_when_the_layer_does():
    f = freight.Freight()
    before = hash(f)

    class Thing:
        pass

    f.register(_ThingSerializer(), types=Thing)
    assert hash(f) == before and f == f


class _ThingSerializer:
    tag = "test.options.thing"

    def serialize(self, obj):
        return {}, []

    def deserialize(self, meta, frames):
        return None


# --- replace --------------------------------------------------------------------------------------


def test_replace_changes_some_options_and_keeps_the_registry():
    f = freight.Freight(compression="lz4", key=KEY, allowed_tags=["a"])
    g = f.replace(allow_pickle=False)
    assert g is not f and g.registry is f.registry
    assert g.options == f.options.replace(allow_pickle=False)
    assert g != f and g.replace(allow_pickle=True) == f
    assert f.replace() == f and hash(f.replace()) == hash(f)
    # It encodes and decodes with them.
    with pytest.raises(freight.UnsafePayloadError):
        g.loads(freight.dumps(lambda: 1, key=KEY))
    assert freight.inspect(g.dumps(1), key=KEY)["signature_ok"] is True


def test_replace_another_registry():
    layer = Registry(parent=GLOBAL)
    f = freight.Freight(compression="lz4")
    g = f.replace(registry=layer)
    assert g.registry is layer and g.options == f.options and g != f


def test_replace_checks_names_and_values():
    f = freight.Freight()
    with pytest.raises(freight.OptionError, match="did you mean 'allow_pickle'") as info:
        f.replace(alow_pickle=False)
    assert isinstance(info.value, TypeError) and "Freight.replace()" in str(info.value)
    with pytest.raises(freight.OptionError, match="did you mean 'compression'"):
        f.replace(compresion="lz4")
    with pytest.raises(freight.FreightError):
        f.replace(compression="no-such-codec")


def test_replace_keeps_the_dumps_fast_path():
    g = _api._DEFAULT.replace(checksum=True)
    assert type(g.dumps).__name__ == "builtin_function_or_method"
    assert type(g.loads).__name__ == "builtin_function_or_method"


# --- pickling -------------------------------------------------------------------------------------

COPIES = {
    "pickle": lambda f: pickle.loads(pickle.dumps(f)),
    "cloudpickle": lambda f: cloudpickle.loads(cloudpickle.dumps(f)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_over_the_global_registry_is_equal(how):
    f = freight.Freight(registry=GLOBAL, compression=("zstd", 3), key=[KEY, OTHER_KEY], allowed_tags=["b", "a"],
                        max_size=1 << 30, verify=True)  # fmt: skip
    g = COPIES[how](f)
    assert g == f and hash(g) == hash(f) and g.options == f.options
    assert g.replace(compression="lz4") == f.replace(compression="lz4")


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_with_its_own_layer_has_equal_options(how):
    f = freight.Freight(compression=("auto", 1e8), key=KEY)
    g = COPIES[how](f)
    assert g.options == f.options
    # copy.copy shares the layer (equal); the others rebuild it (a new, independent layer).
    assert (g == f) is (how == "copy")
    assert (g.registry is f.registry) is (how == "copy")


def test_instances_sharing_a_layer_stay_equal_through_one_pickle():
    f = freight.Freight(compression="lz4")
    g = f.replace(allow_pickle=False)
    f2, g2 = pickle.loads(pickle.dumps([f, g]))
    assert f2.registry is g2.registry and f2.replace(allow_pickle=False) == g2


def test_module_level_instance_pickles_by_reference():
    assert pickle.loads(pickle.dumps(_api._DEFAULT)) is _api._DEFAULT


def test_old_private_options_dict_still_works():
    # storage and older callers read ``_options`` (a new dict each time, allowed_tags a list).
    f = freight.Freight(compression="lz4", allowed_tags=["x"], key=KEY)
    assert f._options["compression"] == "lz4" and f._options["allowed_tags"] == ["x"] and f._options["key"] == KEY
    f._options["compression"] = "zstd"
    assert f.options.compression == "lz4"


def test_options_replace_and_pickle():
    o = FreightOptions(compression="zstd", key=[KEY, OTHER_KEY])
    assert o.replace(compression=("zstd", 3)) == o
    assert o.replace(compression="lz4").compression == "lz4" and o.compression == "zstd"
    with pytest.raises(freight.OptionError, match="did you mean 'max_size'"):
        o.replace(max_sise=1)
    assert pickle.loads(pickle.dumps(o)) == o and copy.deepcopy(o) == o
    assert o != o.as_dict() and o != tuple(o.as_dict().values())


def test_default_is_the_codec_behind_the_module_functions() -> None:
    # Integrations derive their codec with DEFAULT.replace(**options): with no options that is
    # DEFAULT itself (its registry is the global one, and it pickles by reference).
    assert freight.DEFAULT.replace() is freight.DEFAULT
    assert freight.dumps == freight.DEFAULT.dumps and freight.loads == freight.DEFAULT.loads
    assert freight.DEFAULT.options == freight.Freight().options
    assert pickle.loads(pickle.dumps(freight.DEFAULT)) is freight.DEFAULT
    lz4 = freight.DEFAULT.replace(compression="lz4")
    assert lz4 is not freight.DEFAULT and lz4.registry is freight.DEFAULT.registry
    assert isinstance(lz4.options, freight.FreightOptions)
