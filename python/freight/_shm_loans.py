"""What a shared-memory loan (:mod:`freight.shm`) is on the wire: its name, which says where the
lent segment is and where to acknowledge it, and the acknowledgement channel (a receiver that
mapped a lent segment sends the loan's token to its lender, which then unpins it). One Unix
datagram socket per process in the abstract namespace (no file; it goes with its process), bound
when the process first lends, and one unbound socket to send from."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from typing import Any

from freight.exceptions import RefError

__all__ = ["MARK", "name", "parse", "address", "send", "received", "close", "after_fork_in_child"]

MARK = ".lent-"  # a loan's name: <fallback name>.lent-<fd>-<dev>-<inode>-<acknowledgement tag>

_BOUND: list[Any] = []  # [this process's socket, its address]
_SENDER: list[Any] = []
_LOCK = threading.Lock()


def name(fallback: str, fd: int, dev: int, ino: int, address: str) -> str:
    """The loan's name: the fallback name the lender copies it to if it exits first, the lender's
    descriptor of the segment and the segment's identity, where to acknowledge."""
    return f"{fallback}{MARK}{fd}-{dev}-{ino}-{address.rpartition('-')[2]}"


def parse(loan: str, prefix: str) -> tuple[int, int, int, int, int, str, str]:
    """A loan's (pid, fd, dev, ino, token, acknowledgement address, fallback name)."""
    fallback, _, rest = loan.partition(MARK)
    try:
        pid, token = fallback[len(prefix) :].split("-")
        fd, dev, ino, tag = rest.split("-")
        int(tag, 16)
        return int(pid), int(fd), int(dev), int(ino), int(token, 16), f"\0freight-ack-{pid}-{tag}", fallback
    except ValueError:
        raise RefError(f"{loan[:200]!r} is not the name of a shared-memory loan: the reference is corrupt") from None


def address() -> str | None:
    """This process's address (``\\0freight-ack-<pid>-<tag>``), its socket bound on first use;
    None where there is none (no AF_UNIX)."""
    if _BOUND:
        return _BOUND[1]
    import socket

    with _LOCK:
        if not _BOUND:
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                where = f"\0freight-ack-{os.getpid()}-{secrets.token_hex(8)}"
                sock.bind(where)
                sock.setblocking(False)
            except (OSError, AttributeError):
                return None
            _BOUND[:] = [sock, where]
    return _BOUND[1]


def send(to: str, token: int) -> None:
    import socket

    try:
        if not _SENDER:
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.setblocking(False)
            _SENDER.append(sender)
        _SENDER[0].sendto(token.to_bytes(8, "little"), to)
    except OSError:
        pass  # the lender is gone (nothing to unpin) or its queue is full: it keeps the pin until it exits


def received() -> Iterator[int]:
    """The tokens acknowledged to this process since the last call (never blocks)."""
    if not _BOUND:
        return
    sock = _BOUND[0]
    while True:
        try:
            yield int.from_bytes(sock.recv(16), "little")
        except OSError:  # BlockingIOError: nothing more
            return


def close() -> None:
    """Closes both sockets (at exit, once every loan is settled: at the interpreter's teardown each
    one would be a ResourceWarning)."""
    with _LOCK:
        for sock in (*_BOUND[:1], *_SENDER):
            sock.close()
        _BOUND.clear()
        _SENDER.clear()


def after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()
    close()  # the parent's: its acknowledgements are not this process's
