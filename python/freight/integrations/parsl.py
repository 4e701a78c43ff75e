"""Parsl integration: freight as the first serializer Parsl tries for data (arguments and results).

One line for the user, in the submitting program, before the apps run::

    import freight.integrations.parsl as fp
    fp.install()

Parsl serializes a task as three buffers: the function (its "code" methods: dill, cached per
function) and the positional and keyword arguments (its "data" methods). For data it tries the
methods of ``parsl.serialize.facade.methods_for_data`` in registration order and keeps the first
that does not raise: dill alone today, so numpy arrays and DataFrames are pickled in band.
:func:`install` registers :class:`FreightSerializer` with
``parsl.serialize.facade.register_method_for_data`` and moves it to the front (the dict is updated
in place: ``serialize`` looks it up by name). freight encodes anything (what it has no native form
for goes to cloudpickle inside the payload), so dill is reached only if freight raises.

How workers get it: every Parsl payload starts with its method's identifier, and for one it does
not know a worker imports ``module Class`` from the identifier and instantiates the class with no
argument (``facade.deserialize``). :class:`FreightSerializer`'s identifier is
``freight.integrations.parsl FreightSerializer``, so any worker with freight installed decodes
freight payloads without configuration. Parsl keeps such a dynamically loaded method for decoding
only; the first freight payload a process decodes also installs freight there for its own
serializing, so that results go back the way the arguments came (``reply_in_kind=False`` in
:func:`install` leaves workers' results to dill).

Large payloads (1 MiB and more) do not travel inside Parsl's messages, which each hop (submitter,
interchange, manager, worker) pickles and copies again: they are written once to a freight store
and the message carries the carrier's reference (:mod:`freight.carrier`, ``_parsl_values``).
Where: ``large_values_url`` (a shared folder, S3), by default a folder in ``/dev/shm`` when every
executor's workers run on this machine (a LocalProvider's), else nowhere: in the messages. The
reader deletes what it read; the submitter removes what nobody read at exit.

Options: ``install(**options)`` passes them to :class:`freight.Freight` for what this process
writes (``compression``, ``checksum``, ...). What a worker loads with is its own default (pickle
allowed: Parsl workers run the functions the submitter sends, so refusing pickle there protects
nothing), or the environment variable ``FREIGHT_PARSL_ALLOW_PICKLE=0`` where a worker must refuse
pickle payloads.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import freight
from freight import carrier
from freight.integrations import _parsl_values as _values
from freight.integrations import check_options, flag

try:  # Parsl is an optional dependency (``pip install 'freight[parsl]'``).
    from parsl.serialize import facade as _facade
    from parsl.serialize.base import SerializerBase as _SerializerBase
except ImportError as e:  # pragma: no cover - depends on the environment
    raise freight.MissingDependencyError("freight.integrations.parsl needs Parsl: pip install 'freight[parsl]'") from e

__all__ = ["FreightSerializer", "install", "uninstall", "installed", "IDENTIFIER"]

#: What starts every freight payload in Parsl: how workers find this module and class.
IDENTIFIER = b"freight.integrations.parsl FreightSerializer"

_LOCK = threading.Lock()
# large: a LargeValues, "auto" or None; implicit: install() ran because a payload arrived (a worker)
_STATE: dict[str, Any] = {
    "reply_in_kind": True,
    "large": None,
    "threshold": carrier.THRESHOLD,
    "implicit": False,
}


class FreightSerializer(_SerializerBase):  # type: ignore[misc]
    """A Parsl data serializer writing and reading freight payloads.

    Args:
        **options: keyword arguments of :class:`freight.Freight` for writing and reading. With
            none (how a worker instantiates it), the module-level codec, or pickle refused when
            the environment variable ``FREIGHT_PARSL_ALLOW_PICKLE`` is ``0``.
    """

    identifier = IDENTIFIER  # Parsl's default (module + class) spelled out: workers rely on it

    def __init__(self, **options: Any) -> None:
        check_options("FreightSerializer", options, takes=("registry",))
        if not options and os.environ.get("FREIGHT_PARSL_ALLOW_PICKLE", "1") == "0":
            options = {"allow_pickle": False}
        self.options = dict(options)
        self._codec: freight.Freight = freight.DEFAULT.replace(**options)

    def serialize(self, data: Any) -> bytes:
        out = self._codec.dumps(data)
        out = out if type(out) is bytes else bytes(out)
        large, threshold = _STATE["large"], _STATE["threshold"]
        if large == "auto":
            large = _values.automatic()
        if large is not None and carrier.carries(len(out), threshold):
            return large.put(out)
        return out

    def deserialize(self, body: bytes) -> Any:
        if _STATE["reply_in_kind"] and not installed():
            # A worker decoding its first freight payload: its results go back through freight too.
            install()
            _STATE["implicit"] = True
        if carrier.is_ref(body):
            body, url, run = _values.read(body)
            if _STATE["implicit"] and _STATE["large"] in (None, "auto"):
                # A worker told nothing of a store: large results go back the way the arguments
                # came. Never in a process that called install() itself (the submitter): its
                # options stand.
                _STATE["large"] = _values.LargeValues(url, run)
        return self._codec.loads(body)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({args})"


def install(
    *,
    reply_in_kind: bool = True,
    large_values: int = carrier.THRESHOLD,
    large_values_url: str | None = "auto",
    **options: Any,
) -> FreightSerializer:
    """Registers freight as the first data serializer Parsl tries, in this process.

    Args:
        reply_in_kind: True (default): a process that decodes a freight payload without having
            installed freight (a worker) installs it too, so its results travel as freight (and,
            when the arguments came through ``large_values_url``, large results too).
        large_values: with ``large_values_url``, payloads of at least this many bytes (default
            1 MiB) are written there and Parsl's messages carry a reference (see
            docs/integrations/parsl.md: Parsl's own hops copy a payload a dozen times).
        large_values_url: a freight store every worker can read: ``file://`` a shared folder,
            ``s3://bucket/prefix``; None: payloads stay in Parsl's messages. ``"auto"`` (default):
            the environment variable ``FREIGHT_PARSL_LARGE_VALUES_URL`` when set, else a folder
            in ``/dev/shm`` when every executor of the loaded DataFlowKernel runs its workers on
            this machine (HighThroughputExecutor, LocalProvider, SingleNodeLauncher), else the
            messages.
        **options: options of :class:`freight.Freight` for what this process writes.

    Returns:
        the registered serializer.

    Raises:
        freight.OptionError: an option :class:`freight.Freight` does not take, or ``key``: the
            workers make their serializer without options (Parsl instantiates it by name), so
            they would neither check signatures nor sign their results, which this process would
            then refuse, every one.
    """
    check_options(
        "freight.integrations.parsl.install", options, takes=("reply_in_kind", "large_values", "large_values_url")
    )
    reply_in_kind = flag("reply_in_kind", reply_in_kind, True)
    if options.get("key") is not None:
        raise freight.OptionError(
            "freight.integrations.parsl.install() cannot take key: Parsl's workers make their freight "
            "serializer without options (Parsl instantiates it by name), so they would neither check the "
            "signature nor sign their results, and this process would refuse every result; drop it, and protect "
            "Parsl's own channels instead (HighThroughputExecutor(encrypted=True), the default of recent Parsl)"
        )
    if type(large_values) is not int or large_values < 0:
        raise freight.OptionError(f"large_values must be a size in bytes (an int ≥ 0), not {large_values!r}")
    # The submitter (given a URL) removes what nobody read at exit; a worker (the environment's
    # URL) must not: its results may not be read yet when it exits.
    url = (os.environ.get(_values.ENV_URL) or "auto") if large_values_url == "auto" else large_values_url
    large: Any = url
    if url not in (None, "auto"):
        large = _values.LargeValues(url, owner=url == large_values_url)
    serializer = FreightSerializer(**options)
    with _LOCK:
        _STATE["reply_in_kind"] = reply_in_kind
        _STATE["large"] = large
        _STATE["threshold"] = large_values
        _STATE["implicit"] = False
        methods = _facade.methods_for_data
        rest = [(k, v) for k, v in methods.items() if k != IDENTIFIER]
        _facade.register_method_for_data(serializer)
        # Parsl tries data methods in insertion order: rebuild the same dict with freight first.
        methods.clear()
        methods[IDENTIFIER] = serializer
        methods.update(rest)
    return serializer


def uninstall() -> None:
    """Removes freight from Parsl's data serializers in this process (freight payloads still load)."""
    with _LOCK:
        _facade.methods_for_data.pop(IDENTIFIER, None)
        _STATE["reply_in_kind"] = False
        _STATE["large"] = None


def installed() -> bool:
    """Whether freight is the first data serializer Parsl tries in this process."""
    return next(iter(_facade.methods_for_data), None) == IDENTIFIER
