"""Rendezvous ports: pick a free one, or check the one the user set."""

from __future__ import annotations

import socket


def check_port_free(host: str, port: int) -> None:
    """The rendezvous port (MASTER_PORT) must be free on the main node, or fail in one line."""
    from trainkit.errors import ConfigError

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no clash
            sock.bind(("" if host in ("localhost", "127.0.0.1") else host, port))
    except OSError as err:
        raise ConfigError(
            "MASTER_PORT",
            port,
            f"a free port on {host}",
            f"{err.strerror}; unset MASTER_PORT to let trainkit pick one",
        ) from None


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free right now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
