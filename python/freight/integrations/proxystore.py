"""ProxyStore integration: a ``proxystore.store.Store`` whose serializer is freight.

One line for the user::

    from proxystore.connectors.file import FileConnector
    from freight.integrations.proxystore import freight_store

    store = freight_store("name", FileConnector("/tmp/ps"))       # any ProxyStore connector
    p = store.proxy(df)                                            # resolves with freight anywhere

Keyword options go to :class:`freight.Freight` (``compression``, ``allow_pickle``, ``allowed_tags``,
``checksum``, ``max_size``, ``strict_versions``, ``zero_copy``, ``verify``) or to the ``Store``
(``cache_size``, ``metrics``, ``populate_target``, ``register``); ``key`` signs the payloads.

A proxy carries its store's configuration, serializer and deserializer included, to every process
that resolves it. The two are small objects of this module that pickle by reference to their class
with the non-secret options and the store's name only. **The signing key never travels in a
proxy**: every process that writes or resolves through a signed store finds the key in its own
configuration, in this order:

1. :func:`configure` ``(name, key=...)`` called in that process (``freight_store(..., key=...)``
   calls it for the creating process);
2. the environment variable ``FREIGHT_PROXYSTORE_KEY_<NAME>`` (the store name upper-cased, every
   character other than ``A-Z0-9`` replaced by ``_``);
3. the environment variable ``FREIGHT_KEY``.

Environment values are the key's UTF-8 text, or ``hex:<hex digits>`` or ``base64:<base64>``.
A store created with a key is marked *signed* in its configuration (a flag, not the key): a process
that resolves its proxies without any key configured raises :class:`MissingKeyError` instead of
loading an unverified payload. A process with a key configured for a store always requires a valid
signature, whatever the proxy says.

Errors: resolving a proxy wraps the deserializer's error twice (ProxyStore's ``ProxyResolveError``,
from its ``SerializationError``, from freight's error): the freight error, a
:class:`freight.FreightError`, is the root ``__cause__`` and its message says what to do;
:func:`freight_error` finds it in a chain.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
from typing import TYPE_CHECKING, Any

import freight
from freight.exceptions import FreightError
from freight.integrations import check_options, flag

if TYPE_CHECKING:
    from proxystore.store import Store

__all__ = [
    "freight_store",
    "configure",
    "unconfigure",
    "FreightSerializer",
    "FreightDeserializer",
    "MissingKeyError",
    "freight_error",
    "key_env_var",
]

# Options of freight.Freight that travel with a proxy (none of them is secret).
_FREIGHT_OPTIONS = (
    "allow_pickle",
    "zero_copy",
    "verify",
    "checksum",
    "compression",
    "max_size",
    "allowed_tags",
    "strict_versions",
)
# Keyword arguments of proxystore.store.Store that freight_store passes on.
_STORE_OPTIONS = ("cache_size", "metrics", "populate_target", "register")


class MissingKeyError(FreightError):
    """A signed store is used in a process that has no key configured for it."""


# name -> {"key": bytes | list[bytes] | None, "allow_pickle": bool | None}, set by configure().
_CONFIG: dict[str, dict[str, Any]] = {}
# Options (the key included) -> Freight: one codec per configuration per process, built on first use.
_CODECS: dict[freight.FreightOptions, freight.Freight] = {}
_LOCK = threading.Lock()


def key_env_var(name: str) -> str:
    """The environment variable holding the key of the store called ``name``
    (``FREIGHT_PROXYSTORE_KEY_`` and the name upper-cased, other characters than ``A-Z0-9`` as ``_``)."""
    return "FREIGHT_PROXYSTORE_KEY_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def configure(name: str, *, key: bytes | str | list[bytes] | None = None, allow_pickle: bool | None = None) -> None:
    """Configures, in this process, what the store called ``name`` uses that must not travel in a proxy.

    Args:
        name: the store's name (as given to :func:`freight_store`).
        key: the signing key (bytes, or text encoded as UTF-8); a list of keys is accepted when
            loading (the first one signs), for rotation. None removes a configured key (the
            environment variables then apply).
        allow_pickle: False refuses, in this process, payloads that would run pickle even when the
            store was created with ``allow_pickle=True`` (it can only tighten).

    Call it in every process that resolves proxies of a signed store (for a
    ``ProcessPoolExecutor``, as its ``initializer``), or set the environment variable
    :func:`key_env_var` ``(name)`` or ``FREIGHT_KEY`` there instead.
    """
    if key is not None:
        key = _as_key(key)
    # None: not configured here; "false" must not leave pickle allowed.
    allow_pickle = flag("allow_pickle", allow_pickle, None)
    with _LOCK:
        _CONFIG[name] = {"key": key, "allow_pickle": allow_pickle}


def unconfigure(name: str) -> None:
    """Forgets what :func:`configure` set for ``name`` in this process."""
    with _LOCK:
        _CONFIG.pop(name, None)


def _as_key(key: Any) -> bytes | list[bytes]:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, (list, tuple)) and key:
        return [_as_key(k) for k in key]  # type: ignore[misc]
    raise freight.OptionError(f"a freight key is bytes, str or a non-empty list of them, not {type(key).__name__}")


def _env_key(value: str, var: str) -> bytes:
    try:
        if value.startswith("hex:"):
            return bytes.fromhex(value[4:])
        if value.startswith("base64:"):
            return base64.b64decode(value[7:], validate=True)
    except (ValueError, binascii.Error) as e:
        raise MissingKeyError(
            f"the environment variable {var} does not hold a valid key ({e}); "
            "set it to the key's text, hex:<hex> or base64:<base64>"
        ) from e
    return value.encode()


def _configured(name: str) -> tuple[bytes | list[bytes] | None, bool | None]:
    conf = _CONFIG.get(name)
    key = conf["key"] if conf else None
    allow_pickle = conf["allow_pickle"] if conf else None
    if key is None:
        for var in (key_env_var(name), "FREIGHT_KEY"):
            value = os.environ.get(var)
            if value:
                key = _env_key(value, var)
                break
    return key, allow_pickle


def _env_probe(store_var: str) -> Any:
    """A function returning the current values of ``store_var`` and ``FREIGHT_KEY`` as the
    environment keeps them (compared with the last ones, never used: ``_configured`` reads the key
    itself). ``os.environ.get`` of a variable that is not set raises and catches a KeyError: 1.8 us
    each, two per ``put`` and two per ``get``, more than a tiny value's whole serialization.
    ``os.environ`` keeps its values in ``_data``, the mapping its own methods read and write."""
    data, encode = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    if not isinstance(data, dict) or encode is None:  # pragma: no cover - not CPython's os.environ
        return lambda: (os.environ.get(store_var), os.environ.get("FREIGHT_KEY"))
    get, first, second = data.get, encode(store_var), encode("FREIGHT_KEY")
    return lambda: (get(first), get(second))


class _StoreCodec:
    """What a proxy carries: the store's name, freight's non-secret options and whether the store is
    signed. Pickles by reference to its class (``__reduce__``): never a key, never a ``Freight``."""

    def __init__(self, store: str, options: dict[str, Any] | None = None, signed: bool = False) -> None:
        options = dict(options or {})
        check_options(type(self).__name__, options, freight=_FREIGHT_OPTIONS)
        if options.get("allowed_tags") is not None:
            options["allowed_tags"] = list(options["allowed_tags"])
        self.store = store
        self.options = options
        # Normalised (compression="zstd" and ("zstd", 3) alike): for equality and the codec cache.
        self._normal = freight.FreightOptions(**options)
        self.signed = bool(signed)
        # proxystore names the deserializer in its error messages with obj.__qualname__.
        self.__qualname__ = type(self).__qualname__
        self._env_var = key_env_var(store)
        self._env = _env_probe(self._env_var)
        self._cached: tuple[Any, Any, freight.Freight] | None = None  # never pickled (__reduce__)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.store, self.options, self.signed))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return (self.store, self._normal, self.signed) == (other.store, other._normal, other.signed)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.store, self.signed, self._normal))

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({self.store!r}{args}, signed={self.signed})"

    def _codec(self, action: str) -> freight.Freight:
        # The configuration is looked up on every call (configure() and the environment may change),
        # cheaply: the last codec is kept while configure()'s entry (by identity) and the variables
        # it depends on are unchanged.
        conf = _CONFIG.get(self.store)
        env = None
        if conf is None or conf["key"] is None:
            env = self._env()
        cached = self._cached
        if cached is not None and cached[0] is conf and cached[1] == env:
            return cached[2]
        key, allow_pickle = _configured(self.store)
        if key is None and self.signed:
            raise MissingKeyError(
                f"the ProxyStore store {self.store!r} signs its payloads, but this process has no key "
                f"to {action} them: call freight.integrations.proxystore.configure({self.store!r}, key=...) "
                f"in this process (e.g. as the ProcessPoolExecutor initializer), or set the environment "
                f"variable {self._env_var} or FREIGHT_KEY"
            )
        wanted = (
            self._normal.replace(key=key, allow_pickle=False)
            if allow_pickle is False
            else self._normal.replace(key=key)
        )
        try:
            codec = _CODECS.get(wanted)
        except TypeError:  # an option value that cannot be hashed: the codec refuses it below
            codec = None
        if codec is None:
            # The module-level Freight with these options, over the global registry.
            codec = freight.DEFAULT.replace(**wanted.as_dict())
            with _LOCK:
                if len(_CODECS) > 64:
                    _CODECS.clear()
                codec = _CODECS.setdefault(wanted, codec)
        self._cached = (conf, env, codec)
        return codec


class FreightSerializer(_StoreCodec):
    """The ``serializer`` of a :func:`freight_store`: one ``bytes`` payload per object."""

    def __call__(self, obj: Any) -> bytes:
        return self._codec("sign").dumps(obj)


class FreightDeserializer(_StoreCodec):
    """The ``deserializer`` of a :func:`freight_store`."""

    def __call__(self, data: Any) -> Any:
        return self._codec("verify").loads(data)


def freight_store(name: str, connector: Any, **options: Any) -> Store[Any]:
    """A ``proxystore.store.Store`` called ``name`` over ``connector`` whose serializer is freight.

    Args:
        name: the store's name; proxies find the store (and its key, see :func:`configure`) by it.
        connector: any ProxyStore connector (``FileConnector``, ``RedisConnector``, ...).
        **options: ``key`` (signs every payload; configured for this process only, it never
            travels in a proxy), options of :class:`freight.Freight` (``compression``,
            ``allow_pickle``, ``allowed_tags``, ``checksum``, ``max_size``, ``strict_versions``,
            ``zero_copy``, ``verify``) and of ``Store`` (``cache_size``, ``metrics``,
            ``populate_target``, ``register``).

    Raises:
        freight.OptionError: an option neither freight nor ``Store`` accepts, with the closest
            one (also a TypeError).
        freight.MissingDependencyError: ProxyStore is not installed.
    """
    try:
        from proxystore.store import Store
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise freight.MissingDependencyError("freight_store needs ProxyStore: pip install 'freight[proxystore]'") from e
    if "registry" in options:
        raise freight.OptionError(
            "freight_store does not take a registry (it would have to travel with every proxy): "
            "register serializers with freight.register in a module every process imports"
        )
    check_options("freight_store", options, takes=("key", *_STORE_OPTIONS), freight=_FREIGHT_OPTIONS)
    key = options.pop("key", None)
    store_options = {k: options.pop(k) for k in _STORE_OPTIONS if k in options}
    serializer = FreightSerializer(name, options, signed=key is not None)
    deserializer = FreightDeserializer(name, options, signed=key is not None)
    if key is not None:
        configure(name, key=key, allow_pickle=_CONFIG.get(name, {}).get("allow_pickle"))
    # Built once here so that a bad option fails now, in the caller, rather than at the first put.
    serializer._codec("sign")
    return Store(name, connector, serializer=serializer, deserializer=deserializer, **store_options)


def freight_error(exc: BaseException | None) -> FreightError | None:
    """The :class:`freight.FreightError` in ``exc``'s chain of causes (ProxyStore wraps it twice when
    a proxy fails to resolve), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, FreightError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
