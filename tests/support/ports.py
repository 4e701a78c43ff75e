"""A free TCP port on loopback, for the servers tests start (s3s-fs, redis, Scaler)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS's pick); the server started on it may still lose it
    to another process, so whoever starts one checks that it answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
