"""A real MLflow tracking server for tests: SQLite store and local artifacts in a temp folder,
on a free 127.0.0.1 port, ready once /health answers, stopped with all its worker processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil

from trainkit.distributed.ports import find_free_port

READY_WITHIN_S = 180.0  # a cold start imports mlflow in the server and its worker: slow when busy


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


class MlflowServer:
    """``mlflow server`` on a free port; ``url`` waits until /health answers (so the tests
    that need no server can run while it boots); ``stop`` ends it and every process it started."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "server.log"
        self.address = f"http://127.0.0.1:{find_free_port()}"
        command = [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
            "--default-artifact-root", str(folder / "artifacts"),
            "--host", "127.0.0.1", "--port", self.address.rpartition(":")[2], "--workers", "1",
        ]  # fmt: skip
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job workers
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.ready = False

    @property
    def url(self) -> str:
        """The server's address once /health answers; raises with its log if it died or stalled."""
        deadline = time.monotonic() + READY_WITHIN_S
        while not self.ready:
            if healthy(self.address):
                self.ready = True
            elif self.process.poll() is not None or time.monotonic() > deadline:
                log = self.log.read_text()
                raise RuntimeError(f"mlflow server {self.address} did not start:\n{log}")
            else:
                time.sleep(0.2)  # poll interval between readiness checks
        return self.address

    def stop(self) -> None:
        """Terminate the server and its workers; kill what does not exit."""
        try:
            root = psutil.Process(self.process.pid)
            family = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.terminate()
        _, alive = psutil.wait_procs(family, timeout=60)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(alive, timeout=60)
        self.process.wait(timeout=60)


@contextlib.contextmanager
def mlflow_server(folder: Path) -> Iterator[MlflowServer]:
    """A booting tracking server for the duration of the block, stopped at its end."""
    server = MlflowServer(folder)
    try:
        yield server
    finally:
        server.stop()
