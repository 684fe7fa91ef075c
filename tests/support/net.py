"""Ports on 127.0.0.1 for the servers tests start (and for addresses nobody listens on)."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A port free right now: the OS picks it, the socket closes, the caller binds it next."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int, timeout: float, poll: float = 0.1) -> bool:
    """Whether a server on 127.0.0.1:``port`` accepts connections within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return True
        except OSError:
            time.sleep(poll)
    return False
