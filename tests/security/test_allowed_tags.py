"""``allowed_tags=``: an allowlist of serializer tags (and "pickle") checked from the header and
a structural walk before anything is decoded, on ``loads``, ``loads_frames`` and ``Freight``."""

from __future__ import annotations

import fractions
import pickle

import numpy as np
import pandas as pd
import pytest

import freight
from freight.exceptions import UnsafePayloadError


def _lambda_in_list():
    return [1, lambda: 2]


def test_a_listed_tag_loads_and_an_unlisted_one_is_refused_by_name():
    blob = freight.dumps(pd.DataFrame({"a": [1, 2]}))
    tags = freight.inspect(blob)["tags"]
    assert tags, "a DataFrame uses serializer tags"
    pd.testing.assert_frame_equal(freight.loads(blob, allowed_tags=tags), pd.DataFrame({"a": [1, 2]}))
    with pytest.raises(UnsafePayloadError, match=f'"{tags[0]}"'):
        freight.loads(blob, allowed_tags=["numpy.something-else"])


def test_plain_values_and_arrays_need_no_tag():
    value = {"a": np.arange(3), "b": [1.5, "x"]}
    back = freight.loads(freight.dumps(value), allowed_tags=[])
    assert back["b"] == [1.5, "x"]


def test_pickle_nodes_need_the_pickle_tag_even_with_allow_pickle():
    blob = freight.dumps([1, fractions.Fraction(1, 2)])  # no native form: a pickle island
    with pytest.raises(UnsafePayloadError, match='"pickle"'):
        freight.loads(blob, allowed_tags=[])
    assert freight.loads(blob, allowed_tags=["pickle"])[1] == fractions.Fraction(1, 2)


def test_a_function_node_needs_its_tag_or_pickle():
    # A lambda is freight's own function node now, not a pickle island: what allowed it before
    # ("pickle") still does, and so does its own tag.
    blob = freight.dumps(_lambda_in_list())
    assert freight.inspect(blob)["tags"] == ["builtins.function"]
    with pytest.raises(UnsafePayloadError, match='"builtins.function"'):
        freight.loads(blob, allowed_tags=[])
    assert freight.loads(blob, allowed_tags=["pickle"])[1]() == 2
    assert freight.loads(blob, allowed_tags=["builtins.function"])[1]() == 2


def test_the_check_reaches_serializer_nodes_inside_pickled_payloads():
    # A DataFrame inside a lambda's closure: pickled, with the DataFrame as a freight node in it.
    df = pd.DataFrame({"a": [1]})
    blob = freight.dumps(lambda: df)
    with pytest.raises(UnsafePayloadError):
        freight.loads(blob, allowed_tags=["pickle"])  # the DataFrame's tags are not listed
    tags = freight.inspect(blob)["tags"]
    assert freight.loads(blob, allowed_tags=["pickle", *tags])().equals(df)


def test_frames_layout_and_freight_instances_apply_it_too():
    parts = freight.dumps_frames(pd.Series([1, 2]))
    with pytest.raises(UnsafePayloadError):
        freight.loads_frames(parts, allowed_tags=[])
    strict = freight.Freight(allowed_tags=[])
    with pytest.raises(UnsafePayloadError):
        strict.loads(freight.dumps(pd.Series([1])))
    assert strict.loads(freight.dumps([1, 2])) == [1, 2]
    # A call's list replaces the instance's, and the option survives pickling the instance.
    tags = freight.inspect(freight.dumps(pd.Series([1])))["tags"]
    assert strict.loads(freight.dumps(pd.Series([1])), allowed_tags=tags).tolist() == [1]
    assert pickle.loads(pickle.dumps(strict))._options["allowed_tags"] == []


@pytest.mark.parametrize("bad", ["pandas.DataFrame", [1, 2], 5])
def test_a_malformed_allowlist_is_a_freight_error(bad):
    with pytest.raises(freight.OptionError, match="allowed_tags"):
        freight.loads(freight.dumps(1), allowed_tags=bad)
