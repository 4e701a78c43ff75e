"""Issue 23, "defaults that surprise" and "the first call": a serializer registered without a tag
from ``__main__`` warns; open files are refused as pickle refuses them; ``import freight`` does
the set-up the first calls used to do, so that they import nothing."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import freight


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )


# --------------------------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------------------------


def _serializer_class(module: str, tag: str | None = None) -> type:
    class Thing:
        pass

    class ThingSerializer:
        types = (Thing,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return Thing()

    if tag is not None:
        ThingSerializer.tag = tag
    ThingSerializer.__module__ = module
    ThingSerializer.__qualname__ = "ThingSerializer"
    return ThingSerializer


def test_an_untagged_serializer_from_main_warns_at_the_register_call():
    f = freight.Freight()
    with pytest.warns(freight.FreightWarning) as record:
        entry = f.register(_serializer_class("__main__")())
    assert entry.tag == "__main__.ThingSerializer"
    message = str(record[0].message)
    assert message.startswith(
        "serializer ThingSerializer has no tag, so it is registered as '__main__.ThingSerializer'"
    )
    assert "pass tag='myapp.Name' to register()" in message
    assert record[0].filename == __file__  # the user's line, not freight's
    with pytest.warns(freight.FreightWarning):
        freight.register(_serializer_class("__main__"))  # a class, through the module-level function
    freight.unregister("__main__.ThingSerializer")


def test_a_tag_given_or_declared_or_a_module_path_does_not_warn():
    f = freight.Freight()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.register(_serializer_class("__main__")(), tag="myapp.Thing")
        f.register(_serializer_class("__main__", tag="myapp.Declared")())
        assert f.register(_serializer_class("myapp.things")()).tag == "myapp.things.ThingSerializer"


def test_a_script_registering_an_untagged_serializer_is_told():
    proc = python(
        """
        import freight

        class Point:
            pass

        class PointSerializer:
            types = (Point,)
            def serialize(self, p):
                return None, []
            def deserialize(self, meta, frames):
                return Point()

        freight.register(PointSerializer())
        """
    )
    assert proc.returncode == 0
    assert (
        "FreightWarning: serializer PointSerializer has no tag, so it is registered as '__main__.PointSerializer'"
        in proc.stderr
    )
    assert '<string>", line 14' in proc.stderr or "<string>:14" in proc.stderr  # the register() line


# --------------------------------------------------------------------------------------------
# Open files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["r", "rb", "w", "a+", "rb+"])
def test_open_files_are_refused_like_pickle_refuses_them(tmp_path, mode):
    path = tmp_path / "data.txt"
    path.write_text("hello")
    with open(path, mode) as fh:
        with pytest.raises(pickle_error()):
            pickle_dumps(fh)
        # Where the file is in the value comes first (issue 30: the path to the entry that failed).
        for value, where in ((fh, ""), ({"log": [fh]}, 'value["log"][0], '), ((1, fh), "value[1], ")):
            with pytest.raises(freight.SerializationError) as info:
                freight.dumps(value)
            assert str(info.value) == (
                f"cannot serialize {where}an open file ({type(fh).__name__} {str(path)!r}): a file handle does not "
                "mean the same thing in another process; send its path, or its contents (f.read())"
            )


def pickle_error() -> tuple[type[BaseException], ...]:
    import pickle

    return (TypeError, pickle.PicklingError)


def pickle_dumps(obj: object) -> bytes:
    import pickle

    return pickle.dumps(obj, protocol=5)


def test_a_refused_file_kept_in_a_cycle_is_freed_on_any_thread(tmp_path, monkeypatch):
    """The error keeps the pickler's frames; a caller that keeps the error in a cycle had the
    garbage collector drop the pickler's Rust hook on another thread, which raised there."""
    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_value))
    path = tmp_path / "data.txt"
    path.write_text("hello")

    def keep() -> None:
        with open(path) as fh:
            try:
                freight.dumps({"file": fh, "f": lambda: 1})
            except freight.SerializationError as exc:
                kept = exc  # a cycle: the error, its traceback, this frame, the error
                assert kept.__traceback__ is not None

    gc.disable()
    try:
        keep()
        collector = threading.Thread(target=gc.collect)
        collector.start()
        collector.join()
    finally:
        gc.enable()
    assert seen == []


def test_in_memory_files_and_the_standard_streams_still_travel():
    assert freight.loads(freight.dumps(io.BytesIO(b"ab"))).getvalue() == b"ab"
    assert freight.loads(freight.dumps(io.StringIO("ab"))).getvalue() == "ab"
    proc = python(
        """
        import sys, freight
        assert freight.loads(freight.dumps(sys.stdout)) is sys.stdout
        assert freight.loads(freight.dumps({"err": sys.stderr}))["err"] is sys.stderr
        """
    )
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------------------------
# The first call
# --------------------------------------------------------------------------------------------


def test_the_first_calls_import_nothing():
    """The first dumps/loads import nothing: freight's numpy module is imported by ``import
    freight`` when numpy already is, and the walker looks its stdlib types up in modules already
    imported (issue 32: zoneinfo is no longer imported for them)."""
    proc = python(
        """
        import datetime, sys
        import numpy as np
        import freight

        before = set(sys.modules)
        for value in (1, [[1, 2], {"a": (3,)}], datetime.date(2020, 1, 1), np.arange(128.0)):
            assert freight.loads(freight.dumps(value)) is not None
        print(sorted(set(sys.modules) - before))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[]\n"


def test_import_freight_stays_light():
    proc = python(
        """
        import sys
        import freight
        print(sorted(m for m in ("numpy", "inspect", "difflib", "json") if m in sys.modules))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[]\n"
    assert np.__name__ == "numpy"  # numpy itself is fine here: this process imported it
