"""Rendezvous ports: pick a free one, or check the one the user set."""

from __future__ import annotations

import socket
import threading

RESOLVE_SECONDS = 10.0  # how long a MASTER_ADDR may take to resolve before it is refused


def check_port_free(
    host: str, port: int, fix: str = "unset MASTER_PORT to let trainkit pick one"
) -> None:
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
            f"{err.strerror}; {fix}",
        ) from None


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free right now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def check_resolvable(host: str, variable: str = "MASTER_ADDR") -> None:
    """``host`` must resolve to an address (within RESOLVE_SECONDS), or fail in one line: the
    ranks would otherwise retry connecting to it until the collective timeout."""
    from trainkit.errors import ConfigError

    outcome: list[str] = []

    def resolve() -> None:
        try:
            socket.getaddrinfo(host, None)
            outcome.append("")
        except (OSError, UnicodeError) as err:
            outcome.append(str(getattr(err, "strerror", None) or err))

    worker = threading.Thread(target=resolve, name="trainkit-resolve", daemon=True)
    worker.start()
    worker.join(RESOLVE_SECONDS)
    reason = outcome[0] if outcome else f"no answer within {RESOLVE_SECONDS:g} s"
    if reason:
        raise ConfigError(
            variable,
            host,
            "the host name or address of rank 0's node, resolvable here",
            f"{reason}; set it to that node's name (e.g. {variable}=$(hostname) there) or unset "
            "it on one machine",
        )
