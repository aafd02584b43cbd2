"""``python -m tests.clusters.hold_port READY_FILE [STEP]``: listen on the rendezvous port that
trainkit derives for step STEP (default 0) of this SLURM job, as an unrelated service would,
until killed; READY_FILE appears once the port is held."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

from trainkit.distributed.slurm import step_port


def main() -> None:
    ready, step = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    port = step_port(int(os.environ["SLURM_JOB_ID"]), step)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", port))
        sock.listen()
        Path(ready).write_text(str(port))
        signal.pause()  # until the test's script kills it


if __name__ == "__main__":
    main()
