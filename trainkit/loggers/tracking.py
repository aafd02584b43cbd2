"""TrackingLogger: the shared part of loggers whose runs live in a tracking service (MLflow, W&B)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from trainkit.distributed.comm import global_rank
from trainkit.errors import ConfigError
from trainkit.loggers.base import Logger, SavedCheckpoints

LOG_MODEL = (False, True, "all")


def require(package: str, logger: str) -> None:
    """A one-line ConfigError naming the pip install when ``package`` cannot be imported."""
    try:
        found = importlib.util.find_spec(package) is not None
    except ValueError:  # sys.modules[package] is None: imports of it are blocked
        found = False
    if not found:
        raise ConfigError(
            "trainer.logger", logger, f"the {package} package installed",
            f"pip install 'trainkit[{package}]'",
        )  # fmt: skip


class NoExperiment:
    """``.experiment`` on ranks other than 0: every attribute and call does nothing."""

    def __getattr__(self, name: str) -> NoExperiment:
        return self

    def __call__(self, *args: object, **kwargs: object) -> NoExperiment:
        return self


class TrackingLogger(Logger):
    """A run in a tracking service: its id is the version, started by global rank 0 on first
    use and shared by the trainer with every rank; local files go to ``save_dir/group/run id``."""

    def __init__(
        self,
        save_dir: str | None,
        group: str,
        run_id: str | None,
        prefix: str,
        log_model: bool | str,
    ) -> None:
        if log_model not in LOG_MODEL:
            raise ConfigError(f"{type(self).__name__} log_model", log_model, "false, true or 'all'")
        self.save_dir = None if save_dir is None else str(save_dir)
        # without a save_dir (a remote store), the run's local files go under this folder, as
        # Lightning's checkpoints do: the trainer sets it to its default_root_dir
        self.files_root = "."
        self.group = group
        self.prefix = prefix
        self.sub_dir = None
        self.log_model = log_model
        self._run_id = run_id
        self._started = False
        self._checkpoint_callback: SavedCheckpoints | None = None
        self._logged_checkpoints: dict[Path, int] = {}

    def start_run(self) -> str:
        """Start (or attach to) the run in this process; returns its id."""
        raise NotImplementedError

    def ensure_run(self) -> bool:
        """Start the run on global rank 0 (once); True where this process logs."""
        if global_rank() != 0:
            return False
        if not self._started:
            self._run_id = self.start_run()
            self._started = True
        return True

    @property
    def version(self) -> str | None:
        """The run id (reading it on global rank 0 starts the run)."""
        self.ensure_run()
        return self._run_id

    @version.setter
    def version(self, value: int | str | None) -> None:
        if isinstance(value, str):  # rank 0's run id; another logger's version_N number is not one
            self._run_id = value

    @property
    def run_id(self) -> str | None:
        return self.version

    @property
    def root_dir(self) -> str:
        if self.save_dir is None:
            return str(Path(self.files_root) / str(self.name))
        return str(Path(self.save_dir) / self.group)

    @property
    def log_dir(self) -> str:
        """This run's local folder (checkpoints, config.yaml): ``save_dir/group/run id``, or
        without a save_dir ``files_root/name/run id``."""
        return str(Path(self.root_dir) / str(self.version))

    def after_save_checkpoint(self, checkpoint_callback: SavedCheckpoints) -> None:
        """log_model='all' (or save_top_k=-1): upload now; True: remember, upload at finalize."""
        if not self.log_model or global_rank() != 0:
            return
        if self.log_model == "all" or checkpoint_callback.save_top_k == -1:
            self.log_checkpoints(checkpoint_callback)
        else:
            self._checkpoint_callback = checkpoint_callback

    def log_checkpoints(self, checkpoint_callback: SavedCheckpoints) -> None:
        """Upload the callback's checkpoints not uploaded yet (or rewritten since)."""
        for path, aliases in saved_checkpoints(checkpoint_callback).items():
            stamp = path.stat().st_mtime_ns
            if self._logged_checkpoints.get(path) != stamp:
                self.log_checkpoint(path, aliases)
                self._logged_checkpoints[path] = stamp

    def log_pending_checkpoints(self) -> None:
        """log_model=True: the best and last checkpoints, once, at the end of the run."""
        if self._checkpoint_callback is not None:
            self.log_checkpoints(self._checkpoint_callback)

    def log_checkpoint(self, path: Path, aliases: list[str]) -> None:
        """Upload one checkpoint file (or sharded checkpoint folder)."""
        raise NotImplementedError


def saved_checkpoints(checkpoint_callback: SavedCheckpoints) -> dict[Path, list[str]]:
    """The callback's checkpoints on disk, oldest first, each with its aliases (best, latest)."""
    found: dict[Path, list[str]] = {Path(p): [] for p in checkpoint_callback.best_k_models}
    for path, alias in (
        (checkpoint_callback.best_model_path, "best"),
        (checkpoint_callback.last_model_path, "latest"),
    ):
        if path:
            found.setdefault(Path(path), []).append(alias)
    existing = sorted((p for p in found if p.exists()), key=lambda p: p.stat().st_mtime_ns)
    return {path: found[path] for path in existing}
