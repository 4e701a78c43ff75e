"""Issue 32: ``import freight`` computes nothing a first call can do. The walker looks each stdlib
type up only once its module is imported (the encoder never imports one: no object can be a
ZoneInfo before zoneinfo is), the decoder imports the module its payload needs, and the same
value gives the same bytes whenever its module was imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_import_freight_and_its_first_calls_leave_zoneinfo_unimported():
    # (freight.registry imports datetime, decimal, pathlib and uuid for its own reasons.)
    proc = python(
        """
        import sys
        import freight
        assert freight.loads(freight.dumps([[1, "a"], {"b": (2.5, None)}])) == [[1, "a"], {"b": (2.5, None)}]
        print(sorted(m for m in ("zoneinfo", "_zoneinfo") if m in sys.modules))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[]\n"


# Encodes a stdlib value after a first call made before its module was imported, then in a
# process that imported everything first: both must be native (no pickle) and byte-identical.
_LATE = """
import sys
import freight
import datetime
# The walker's first calls, zoneinfo not imported yet: a tz that is not a ZoneInfo, and a value
# freight pickles (each looks for the stdlib types and finds zoneinfo missing).
offset = datetime.timezone(datetime.timedelta(hours=1))
freight.loads(freight.dumps([[datetime.datetime(2020, 1, 1, tzinfo=offset), datetime.date(2020, 1, 1)]]))
freight.loads(freight.dumps(freight.FreightError("x")))
assert "zoneinfo" not in sys.modules
import datetime, decimal, uuid, pathlib, zoneinfo
value = [
    datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    decimal.Decimal("1.25"),
    uuid.UUID(int=7),
    pathlib.PurePosixPath("/a/b"),
]
data = freight.dumps(value)
assert freight.loads(data, allow_pickle=False) == value
sys.stdout.write(data.hex())
"""

_EARLY = """
import datetime, decimal, uuid, pathlib, sys, zoneinfo
import freight
value = [
    datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    decimal.Decimal("1.25"),
    uuid.UUID(int=7),
    pathlib.PurePosixPath("/a/b"),
]
sys.stdout.write(freight.dumps(value).hex())
"""


def test_stdlib_values_give_the_same_bytes_whether_their_module_came_before_or_after_the_first_call():
    late, early = python(_LATE), python(_EARLY)
    assert late.returncode == 0, late.stderr
    assert early.returncode == 0, early.stderr
    assert late.stdout == early.stdout


def test_decoding_imports_the_modules_its_payload_needs():
    # The payload is made in this process; the fresh one imports only freight before loading it.
    import datetime
    import decimal
    import pathlib
    import uuid
    import zoneinfo

    import freight

    value = [
        datetime.datetime(2024, 1, 2, tzinfo=zoneinfo.ZoneInfo("UTC")),
        decimal.Decimal("3.5"),
        uuid.UUID(int=9),
        pathlib.PurePosixPath("x/y"),
    ]
    proc = python(
        f"""
        import sys
        import freight
        assert "zoneinfo" not in sys.modules
        back = freight.loads(bytes.fromhex("{freight.dumps(value).hex()}"), allow_pickle=False)
        print(repr(back))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == repr(value)


def test_a_thread_and_the_main_thread_nest_deep_without_a_crash():
    # The main thread's stack limit comes from its top and RLIMIT_STACK (not /proc/self/maps);
    # a thread's from pthread. Either way deep nesting grows onto heap segments.
    proc = python(
        """
        import threading
        import freight
        deep = []
        for _ in range(100_000):
            deep = [deep]
        def check():
            back = freight.loads(freight.dumps(deep))
            for _ in range(100_000):
                back = back[0]
            assert back == []
        check()
        threading.stack_size(256 << 10)
        thread = threading.Thread(target=check)
        thread.start()
        thread.join()
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "ok\n"
