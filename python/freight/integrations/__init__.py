"""freight's integrations with the engines it plugs into (one module each). A module imports
without its engine where it can; what needs the engine raises :class:`freight.MissingDependencyError`
naming the extra to install (:func:`require`). Options are checked where the integration is
built (:func:`check_options`): a misspelled one is an :class:`freight.OptionError` naming the
function as the user called it, not the ``Freight.replace()`` it is passed to."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from freight._api import FreightOptions
from freight._options import flag, is_flag
from freight.exceptions import MissingDependencyError, OptionError

__all__ = ["require", "check_options", "flag", "size"]


def check_options(
    public: str, given: Iterable[str], takes: Iterable[str] = (), freight: Iterable[str] | None = None
) -> None:
    """Raises :class:`freight.OptionError` for the first of ``given`` (keyword names passed to
    ``public``, the function as the user calls it) that is neither an option of
    :class:`freight.Freight` (``freight``: the ones it passes on, all of them by default) nor
    one of ``takes`` (its own), with the closest one it does take."""
    known = [*(FreightOptions.NAMES if freight is None else freight), *takes]
    for name in given:
        if name not in known:
            raise OptionError.unexpected(public, name, known)


def size(name: str, value: Any, minimum: int = 0) -> int:
    """A number of bytes given as ``name=``: an int (not a bool, not a str) of at least
    ``minimum``, else an :class:`freight.OptionError` naming the option (``flag`` is the same for
    yes/no options: ``"false"`` is not read as a truth value)."""
    if isinstance(value, int) and not is_flag(value) and value >= minimum:
        return int(value)
    raise OptionError(f"{name}= takes a number of bytes (an int of at least {minimum}); got {value!r}")


def require(module: str, extra: str, what: str, library: str) -> Any:
    """Imports ``module`` for ``what`` (the function or module that needs it), or raises
    :class:`freight.MissingDependencyError` saying to ``pip install 'freight[extra]'``, with
    the ImportError as its cause. ``library`` is its name as users know it ("Dask")."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(f"{what} needs {library}: pip install 'freight[{extra}]'") from e
