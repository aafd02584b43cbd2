"""How ranks are started, behind one interface: ``launcher.launch(fn, *args) -> result``.

- ``reexec.ReexecLauncher``: re-runs this process's command once per local rank and watches
  the ranks; the launching process is a pure watcher, so ``launch`` ends it with the job's exit
  code (``SystemExit``) and ``fn`` runs in the re-executed ranks when they reach the same call.
- ``spawn.SpawnLauncher``: starts the ranks from this Python process (spawn or fork), runs ``fn``
  in each and returns rank 0's result to the caller (``ddp_spawn``, notebooks).

The strategy decides which (``launches_processes`` / ``spawns_processes``); under an external
launcher (torchrun, SLURM, MPI) there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Launcher(Protocol):
    def launch(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on every rank; return what the caller gets (rank 0's result)."""
        ...
