"""Opening a store: :func:`open` checks the URL (an unknown scheme or a miswritten one is an
error, never a folder) and makes the native store; a local folder that does not exist yet is
created by the first save (opening and reading create nothing)."""

from __future__ import annotations

import operator
import os
import re
from typing import TYPE_CHECKING, Any

from freight import _freight, _options
from freight.exceptions import KeyNotFoundError, OptionError, StorageError, checks_options
from freight.storage.store import Store

if TYPE_CHECKING:
    from freight._api import Freight

__all__ = ["open", "missing_folder"]


@checks_options("freight.storage.open")
def open(  # noqa: A001 - the storage counterpart of the builtin, as fsspec and zarr name it
    url: str | os.PathLike[str],
    *,
    freight: Freight | None = None,
    compression: Any = "auto",
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    allow_http: bool | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
) -> Store:
    """Opens a store.

    Args:
        url: ``file://PATH`` or a plain path (a local folder, created by the first save),
            ``memory://`` (a new, empty store in this process), or ``s3://BUCKET/PREFIX``.
            Any other ``scheme:`` is refused, so a typo (``s3:/bucket``) never becomes a folder;
            write a folder whose name holds a colon as ``./name:x`` or ``file://name:x``.
        freight: the :class:`freight.Freight` that encodes and decodes values (its registry,
            ``allow_pickle``, ``key``, ...); the module-level default when None.
        compression: the default of :meth:`Store.save` (``"auto"``: lz4 where samples shrink).
        endpoint_url, region, access_key_id, secret_access_key, session_token, allow_http:
            S3 settings; each falls back to the standard AWS environment variable
            (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...,
            ``AWS_ALLOW_HTTP=true`` for an ``http://`` endpoint).
        max_retries, timeout, connect_timeout: S3 request retries (with backoff) and timeouts
            in seconds (defaults 5, 60 and 5).

    Raises:
        StorageError: the URL is malformed or its scheme unknown, the folder could never be
            created (a file is in the way), or an ``http://`` endpoint is given without
            ``allow_http=True`` (or ``AWS_ALLOW_HTTP=true``).
    """
    options: dict[str, Any] = _checked_options(
        endpoint_url=endpoint_url,
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        allow_http=allow_http,
        max_retries=max_retries,
        timeout=timeout,
        connect_timeout=connect_timeout,
    )
    allow_http = options["allow_http"]
    if isinstance(url, os.PathLike):  # a path by construction: no scheme to check
        url = os.fspath(url)
        scheme, path = "file", url
    else:
        url = str(url)
        scheme, path = _scheme(url)
    if scheme == "file" and "://" in url and not url.startswith("file://"):
        url = "file://" + os.path.abspath(url)  # a Path such as ./a://b: the native side would see a URL
    if scheme == "s3":
        _check_http(url, endpoint_url, allow_http)
    native: Any
    if scheme == "file" and path and not os.path.isdir(path):
        _check_creatable(url, path)
        native = _NewFolder(url, path, options)
    else:
        native = _freight.NativeStore(url, **options)
    return Store(native, freight=freight, compression=compression)


def _checked_options(**options: Any) -> dict[str, Any]:
    """The S3 settings of :func:`open`, each of the kind the native store takes: an
    :class:`OptionError` naming the setting for any other (rather than the extension's bare
    TypeError, or ``allow_http="no"`` read as a truth value). The native store checks the
    timeouts' values (positive, finite)."""
    import numbers  # a Real: int, float, numpy's scalars

    checked = dict(options)
    for name, value in options.items():
        if value is None:
            continue
        if name == "allow_http":
            checked[name] = _options.flag(name, value, None)
        elif name == "max_retries":
            try:
                retries = operator.index(value) if not _options.is_flag(value) else -1
            except TypeError:
                retries = -1
            if not 0 <= retries < 1 << 32:
                raise OptionError(f"max_retries= takes a whole number of retries, 0 or more; got {value!r}")
            checked[name] = retries
        elif name in ("timeout", "connect_timeout"):
            try:
                if not isinstance(value, numbers.Real) or _options.is_flag(value):
                    raise TypeError
                checked[name] = float(value)
            except (TypeError, OverflowError):
                raise OptionError(f"{name}= takes a number of seconds above 0 (e.g. 30.0); got {value!r}") from None
        elif not isinstance(value, str):
            raise OptionError(f"{name}= takes a str (or None for the AWS environment variable's value); got {value!r}")
    return checked


_SCHEMES = ("file", "memory", "s3")
_KNOWN = "freight knows file://PATH (or a plain path), memory:// and s3://BUCKET/PREFIX"
# A scheme as URLs write it; two characters at least, so that C:\ stays a Windows path.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):(.*)", re.DOTALL)


def _q(text: str) -> str:
    """A URL or key in a message, quoted as the native store's errors quote them."""
    import json  # only for messages: not needed to import freight

    return json.dumps(text, ensure_ascii=False)


def _scheme(url: str) -> tuple[str, str]:
    """("file", path), ("memory", rest) or ("s3", rest); StorageError for anything else that
    looks like a URL (an unknown scheme, or a known one with its slashes missing)."""
    for scheme in _SCHEMES:
        if url.startswith(f"{scheme}://"):
            return scheme, url[len(scheme) + 3 :]
    match = _SCHEME.match(url)
    if match is None:
        return "file", url
    scheme, rest = match.groups()
    known = scheme.lower()
    if rest.startswith("//"):  # a URL: of an unknown scheme, or a known one miswritten (S3://)
        if known in _SCHEMES:
            raise StorageError(f"cannot open store {_q(url)}: did you mean {_q(known + ':' + rest)}? ({_KNOWN})")
        import difflib  # only on this error path

        close = difflib.get_close_matches(known, _SCHEMES, n=1)
        hint = f"did you mean {close[0]}://? " if close else ""
        raise StorageError(f"cannot open store {_q(url)}: unknown scheme {scheme!r}; {hint}{_KNOWN}")
    if known in _SCHEMES:  # slashes missing: s3:/bucket, s3:bucket, file:/abs/path
        fix = f"{known}://" + (rest if known == "file" and rest.startswith("/") else rest.lstrip("/"))
        raise StorageError(f"cannot open store {_q(url)}: malformed URL; did you mean {_q(fix)}? ({_KNOWN})")
    raise StorageError(
        f"cannot open store {_q(url)}: {scheme + ':'!r} reads as a URL scheme, and {_KNOWN}; for a folder "
        f"whose name holds a colon, write {_q('./' + url)} or {_q('file://' + url)}"
    )


def _check_http(url: str, endpoint_url: str | None, allow_http: bool | None) -> None:
    """Refuses, when the store is opened, a plain-http endpoint that every request would refuse
    (object_store's "builder error"), naming the setting that allows it. An explicit
    ``allow_http=False`` is left alone: its requests fail naming AWS_ALLOW_HTTP."""
    if allow_http is not None or os.environ.get("AWS_ALLOW_HTTP", "").lower() in ("true", "1"):
        return
    if endpoint_url is not None:
        endpoint, source = endpoint_url, "endpoint_url"
        fix = "pass allow_http=True to freight.storage.open (or use an https:// endpoint)"
    else:
        source = "AWS_ENDPOINT" if os.environ.get("AWS_ENDPOINT") else "AWS_ENDPOINT_URL"
        endpoint = os.environ.get(source, "")
        fix = "set AWS_ALLOW_HTTP=true, or pass allow_http=True to freight.storage.open"
    if endpoint.lower().startswith("http://"):
        raise StorageError(f"cannot open store {_q(url)}: {source} {endpoint} is plain http, refused by default; {fix}")


def _check_creatable(url: str, path: str) -> None:
    """Refuses a folder that no save could create: a file is in the way (``path`` itself, or
    the nearest of its parents that exists)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return
        existing = parent
    if not os.path.isdir(existing):
        raise StorageError(
            f"cannot open store {_q(url)}: cannot create the folder {path!r}: {existing} is a file, not a folder"
        )


class _NewFolder:
    """The native side of a local store whose folder did not exist when it was opened: reads
    find no values and create nothing; the first write creates the folder (by opening the
    native store, which does that). If the folder appears meanwhile (another process saved),
    reads open it."""

    backend = "file"

    def __init__(self, url: str, path: str, options: dict[str, Any]):
        self._url = url
        self.path = path
        self._options = options
        self._native: Any = None

    @property
    def url(self) -> str:
        if self._native is not None:
            return self._native.url
        return "file://" + os.path.realpath(self.path)  # as the native store names its folder

    def existing(self) -> Any:
        """The native store, if the folder exists now (else None)."""
        if self._native is None and os.path.isdir(self.path):
            self._native = _freight.NativeStore(self._url, **self._options)
        return self._native

    def _created(self) -> Any:
        if self._native is None:
            self._native = _freight.NativeStore(self._url, **self._options)  # creates the folder
        return self._native

    def _missing(self, key: str) -> KeyNotFoundError:
        return KeyNotFoundError(
            f"{self.url}: no value is stored under {_q(key)}: the folder {self.path} does not exist "
            "(a store's folder is created by its first save; check the path)"
        )

    def put_parts(self, key: str, *args: Any, **kwargs: Any) -> None:
        self._created().put_parts(key, *args, **kwargs)

    def put_bytes(self, key: str, *args: Any, **kwargs: Any) -> None:
        self._created().put_bytes(key, *args, **kwargs)

    def _read(self, method: str, key: str, *args: Any, **kwargs: Any) -> Any:
        native = self.existing()
        if native is None:
            raise self._missing(key)
        return getattr(native, method)(key, *args, **kwargs)

    def get(self, key: str, progress: Any = None) -> Any:
        return self._read("get", key, progress=progress)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self._read("get_range", key, start, end)

    def map(self, key: str) -> Any:
        return self._read("map", key)

    def head(self, key: str) -> tuple[int, float, str | None]:
        return self._read("head", key)

    def object_path(self, key: str) -> str:
        return self._created().object_path(key)

    def local_path(self, key: str) -> Any:
        return self._created().local_path(key)  # to write a file there: the folder must exist

    def info(self, key: str) -> Any:
        return self._read("info", key)

    def delete(self, key: str) -> None:
        self._read("delete", key)

    def exists(self, key: str) -> bool:
        native = self.existing()
        return native is not None and native.exists(key)

    def list(self, prefix: str = "") -> list[tuple[str, int, float, str | None]]:
        native = self.existing()
        return [] if native is None else native.list(prefix)

    def delete_prefix(self, prefix: str) -> int:
        native = self.existing()
        return 0 if native is None else native.delete_prefix(prefix)

    def __repr__(self) -> str:
        return f"<freight NativeStore {self.url} (no folder yet)>"


def missing_folder(store: Store) -> str | None:
    """The folder of a local ``store`` that does not exist (nothing was ever saved there), or
    None. The command line refuses to read such a store: the path is likely a typo."""
    native = store._native
    if isinstance(native, _NewFolder) and native.existing() is None:
        return native.path
    return None
