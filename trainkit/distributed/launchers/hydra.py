"""Re-executing the ranks of a Hydra app: every rank reuses rank 0's run folder.

Run again as it was started, a Hydra app would make a new output folder per rank (and, with
``hydra.job.chdir``, look for its script in the wrong folder); the ranks get rank 0's folder as
``hydra.run.dir`` and write no second ``.hydra`` config, as Lightning's launcher does."""

from __future__ import annotations

import sys


def hydra_rank_command() -> list[str] | None:
    """The command that re-runs this Hydra app as one more rank of the same run, or None when
    this process is not a Hydra app."""
    if "hydra" not in sys.modules:
        return None
    # hydra-core is the user's (a Hydra app imported it), not a trainkit dependency
    from hydra.core.hydra_config import HydraConfig  # pyright: ignore[reportMissingImports]
    from hydra.utils import to_absolute_path  # pyright: ignore[reportMissingImports]

    if not HydraConfig.initialized():
        return None
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        command = [sys.executable, "-m", spec.name.removesuffix(".__main__")]
    else:
        command = [sys.executable, to_absolute_path(sys.argv[0])]
    run_dir = HydraConfig.get().runtime.output_dir
    return [*command, *sys.argv[1:], f'hydra.run.dir="{run_dir}"', "hydra.output_subdir=null"]
