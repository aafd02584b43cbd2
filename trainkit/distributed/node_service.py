"""How the launchers of a job on several nodes talk: each serves one-line JSON requests on a TCP
port (node 0's on MASTER_PORT, the others' on a port the OS picks) and asks the others. The
listening socket and the thread that answers on it serve the rendezvous's beacon too.

A leaf: the transport only. What the requests mean is ``launchers/job_nodes.py``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

MAGIC = "trainkit-node"  # every request and answer carries it: a stranger on the port has none
READ_LIMIT = 1 << 20
ANSWER_SECONDS = 2.0  # a peer launcher answers at once; longer means it is gone or not ours

Message = dict[str, Any]


class NotANode(Exception):
    """Something answered on the port, but not a trainkit launcher of a job."""


def encode(message: Message) -> bytes:
    return (json.dumps({**message, "magic": MAGIC}) + "\n").encode()


def decode(data: bytes) -> Message:
    """One message, or ``NotANode`` for anything that is not one."""
    try:
        message = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        raise NotANode(f"answered {data[:40]!r}") from None
    if not isinstance(message, dict) or message.get("magic") != MAGIC:
        raise NotANode(f"answered {data[:40]!r}")
    return message


def read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) < READ_LIMIT:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class Responder:
    """Answers each connection on ``sock`` with ``answer(conn)`` (the bytes to send back, or
    None for none), in a thread, until closed. The asker closes first: no TIME_WAIT is left on
    the port, which the next job may want."""

    def __init__(
        self,
        sock: socket.socket,
        answer: Callable[[socket.socket], bytes | None],
        name: str = "trainkit-node",
    ) -> None:
        self.sock, self.answer = sock, answer
        self.port: int = sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with conn, contextlib.suppress(OSError, NotANode):
                conn.settimeout(ANSWER_SECONDS)
                reply = self.answer(conn)
                if reply is not None:
                    conn.sendall(reply)
                    conn.recv(1)  # wait for the asker to close first

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)


class NodeService(Responder):
    """Answers each request on ``sock`` with ``handle(request)``, in a thread, until closed."""

    def __init__(self, sock: socket.socket, handle: Callable[[Message], Message]) -> None:
        super().__init__(sock, lambda conn: encode(handle(decode(read_line(conn)))))


def listen(port: int) -> socket.socket:
    """A socket listening on ``port`` of every interface (0: one the OS picks); OSError when
    the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no clash
    try:
        sock.bind(("", port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def ask(address: str, request: Message, seconds: float = ANSWER_SECONDS) -> Message:
    """Send ``request`` to the launcher at ``host:port``; its answer. OSError when nothing
    answers there (refused, unreachable, silent past ``seconds``); ``NotANode`` when something
    that is not a trainkit launcher does."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=seconds) as conn:
        conn.settimeout(seconds)
        conn.sendall(encode(request))
        try:
            data = read_line(conn)
        except TimeoutError:
            raise NotANode("accepted the connection but never answered") from None
    if not data:
        raise NotANode("closed the connection without an answer")
    return decode(data)
