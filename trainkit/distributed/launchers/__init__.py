"""How ranks are started, behind one interface: ``launcher.launch(fn, *args)``.

- ``reexec.ReexecLauncher``: re-runs this process's command once per local rank and watches
  the ranks; the launching process is a pure watcher, so ``launch`` never returns (it ends the
  process with the job's exit code) and ``fn`` runs in the re-executed ranks when they reach
  the same call.
- ``spawn.SpawnLauncher``: starts the ranks from this Python process (spawn or fork), runs ``fn``
  in each and returns rank 0's result to the caller (``ddp_spawn``, notebooks).

``choice.py`` chooses, in one place, from plain numbers (``Strategy.launcher`` asks it); under an
external launcher (torchrun, SLURM, MPI, a Kubeflow pod) there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Launcher(Protocol):
    def launch(self, fn: Callable[..., Any], *args: object) -> Any:
        """Run ``fn`` on every rank and return rank 0's result, or never return where this
        process only watches the ranks (``NoReturn`` is a valid result type for that)."""
        ...
