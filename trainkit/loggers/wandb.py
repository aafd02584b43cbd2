"""WandbLogger: metrics, config and checkpoints in a Weights & Biases run (online or offline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trainkit.loggers.tracking import NoExperiment, TrackingLogger, require

if TYPE_CHECKING:
    from torch import nn

STEP = "trainer/global_step"  # the x-axis every metric is plotted against


class WandbLogger(TrackingLogger):
    """Log to a W&B run; ``offline=True`` (or WANDB_MODE=offline) keeps it on disk for ``wandb sync``."""

    def __init__(
        self,
        name: str | None = None,
        save_dir: str = ".",
        version: str | None = None,
        offline: bool = False,
        dir: str | None = None,
        id: str | None = None,
        anonymous: bool | None = None,
        project: str | None = None,
        log_model: bool | Literal["all"] = False,
        experiment: object = None,
        prefix: str = "",
        checkpoint_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            name: The run's display name.
            save_dir: Folder for wandb's files and each run's checkpoints and config.yaml.
            version: Run id, to continue a run (same as id).
            offline: Write the run to disk only (upload later with ``wandb sync``).
            dir: Same as save_dir.
            id: Run id, to continue a run (same as version).
            anonymous: Log to an anonymous account.
            project: The W&B project (default: $WANDB_PROJECT, else trainkit_logs).
            log_model: Upload checkpoints as artifacts: 'all' after every save, true the best
                and last at the end, false never.
            experiment: An existing wandb run to log to.
            prefix: Put before every metric name (``prefix-name``).
            checkpoint_name: Artifact name of the checkpoints (default model-<run id>).
            kwargs: Passed to ``wandb.init`` (entity, tags, group, notes, ...).
        """
        project = project or os.environ.get("WANDB_PROJECT", "trainkit_logs")
        run_id = version or id
        super().__init__(dir or save_dir, project, run_id, prefix, log_model)
        self.project = project
        self.checkpoint_name = checkpoint_name
        self.init_options = {
            "name": name,
            "project": project,
            "dir": self.save_dir,
            "id": run_id,
            "resume": "allow",
            **({"anonymous": "allow"} if anonymous else {}),
            **({"mode": "offline"} if offline else {}),
            **kwargs,
        }
        self._run: Any = experiment  # a wandb run (wandb's own, untyped objects)
        self._owns_run = False

    @property
    def experiment(self) -> Any:
        """The ``wandb`` run (global rank 0; the first use starts it)."""
        if not self.ensure_run():
            return NoExperiment()
        return self._run if self._run is not None else self.open_run()

    @property
    def name(self) -> str:
        """The project, as in Lightning."""
        return self.project

    def start_run(self) -> str:
        return self.open_run().id

    def open_run(self) -> Any:
        """The run to log to: the one given, the script's current one, or wandb.init's (which
        continues this logger's run after a finalize)."""
        require("wandb", "WandbLogger")
        import wandb

        if self._run is None and wandb.run is not None:
            self._run = wandb.run
        if self._run is None:
            Path(self.save_dir or ".").mkdir(parents=True, exist_ok=True)
            self._run = wandb.init(**self.init_options)
            self._owns_run = True
            self.init_options["id"] = self._run.id
        self._run.define_metric(STEP)
        self._run.define_metric("*", step_metric=STEP, step_sync=True)
        return self._run

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        self.experiment.config.update(params, allow_val_change=True)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.experiment.log({**self.prefixed(metrics), STEP: step})

    def watch(
        self,
        model: nn.Module,
        log: str | None = "gradients",
        log_freq: int = 100,
        log_graph: bool = True,
    ) -> None:
        """Log the model's gradients and/or parameters every ``log_freq`` steps."""
        self.experiment.watch(model, log=log, log_freq=log_freq, log_graph=log_graph)

    def log_checkpoint(self, path: Path, aliases: list[str]) -> None:
        import wandb

        artifact = wandb.Artifact(
            self.checkpoint_name or f"model-{self._run_id}",
            type="model",
            metadata={"original_filename": path.name},
        )
        if path.is_dir():
            artifact.add_dir(str(path), name="model.ckpt")
        else:
            artifact.add_file(str(path), name="model.ckpt")
        best = ["best"] if "best" in aliases else []
        self.experiment.log_artifact(artifact, aliases=["latest", *best])

    def finalize(self, status: str = "success") -> None:
        """Upload pending checkpoints (on success) and finish the run this logger started."""
        if not self._started or self._run is None:
            return
        if status == "success":
            self.log_pending_checkpoints()
        if self._owns_run:
            self._run.finish(exit_code=0 if status == "success" else 1)
            self._run = None
