"""``python -m tests.integration.clusters.hold_port READY_FILE [STEP | port=N]``: listen, as an unrelated
service would, on the rendezvous port that trainkit derives for step STEP (default 0) of this
SLURM job, or on port N, until killed; READY_FILE appears once the port is held. Connections
are accepted (by the kernel) and never answered: the silent stranger a rendezvous may meet."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

from trainkit.distributed.slurm import step_port


def port_to_hold(argument: str) -> int:
    if argument.startswith("port="):
        return int(argument.removeprefix("port="))
    return step_port(int(os.environ["SLURM_JOB_ID"]), int(argument))


def main() -> None:
    ready = sys.argv[1]
    port = port_to_hold(sys.argv[2] if len(sys.argv) > 2 else "0")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("", port))
        sock.listen()
        Path(ready).write_text(str(port))
        signal.pause()  # until the test kills it


if __name__ == "__main__":
    main()
