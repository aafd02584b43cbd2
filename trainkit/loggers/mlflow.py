"""MLFlowLogger: params, metrics with their steps and checkpoints in an MLflow run."""

from __future__ import annotations

import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Literal

from trainkit.errors import ConfigError
from trainkit.loggers.tracking import NoExperiment, TrackingLogger, require

RUN_STATUS = {"success": "FINISHED", "finished": "FINISHED", "failed": "FAILED"}
MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
_BAD_KEY = re.compile(r"[^a-zA-Z0-9_/. :-]+")  # characters MLflow refuses in a metric name


def flatten(params: dict[str, Any], parent: str = "") -> dict[str, Any]:
    """Nested dicts as ``a/b`` keys."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{parent}/{key}" if parent else str(key)
        flat.update(flatten(value, name) if isinstance(value, dict) else {name: value})
    return flat


DEFAULT_SAVE_DIR = "./mlruns"


class MLFlowLogger(TrackingLogger):
    """Log to an MLflow tracking server, or to a local store (SQLite) in save_dir."""

    def __init__(
        self,
        experiment_name: str = "trainkit_logs",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        tags: dict[str, Any] | None = None,
        save_dir: str = DEFAULT_SAVE_DIR,
        log_model: bool | Literal["all"] = False,
        prefix: str = "",
        artifact_location: str | None = None,
        run_id: str | None = None,
        synchronous: bool | None = None,
    ) -> None:
        """
        Args:
            experiment_name: The MLflow experiment (created when missing).
            run_name: The run's name in the MLflow UI.
            tracking_uri: Server or store address (default: $MLFLOW_TRACKING_URI, else
                sqlite:///<save_dir>/mlflow.db).
            tags: Tags set on the new run.
            save_dir: Local folder: the default store, and each run's checkpoints and config.yaml
                (with a server or database store and save_dir left at ./mlruns: the trainer's
                default_root_dir/<experiment id>/<run id>, as in Lightning).
            log_model: Upload checkpoints as artifacts: 'all' after every save, true the best
                and last at the end, false never.
            prefix: Put before every metric name (``prefix-name``).
            artifact_location: Where a newly created experiment keeps artifacts.
            run_id: Continue this existing run instead of starting one (params it already has
                keep their values: MLflow refuses changes).
            synchronous: false: log without waiting for the server (None: MLflow's default).
        """
        tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        # a store of its own (a server, a database): the run's files go where Lightning puts
        # them, default_root_dir/<experiment id>/<run id>, unless a save_dir is given
        remote = tracking_uri is not None and not tracking_uri.startswith("file:")
        own_folder = None if remote and save_dir == DEFAULT_SAVE_DIR else save_dir
        super().__init__(own_folder, experiment_name, run_id, prefix, log_model)
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = tags
        folder = Path(save_dir).resolve()  # the local store keeps artifacts beside each run folder
        self.tracking_uri = tracking_uri or f"sqlite:///{folder / 'mlflow.db'}"
        self.artifact_location = artifact_location or (
            None if tracking_uri else (folder / experiment_name).as_uri()
        )
        self.synchronous = synchronous
        self.continues_run = run_id is not None
        self._batch_options = {} if synchronous is None else {"synchronous": synchronous}
        self._client: Any = None
        self._experiment_id: str | None = None

    @property
    def client(self) -> Any:
        """An ``mlflow.MlflowClient`` for tracking_uri (made on first use)."""
        if self._client is None:
            require("mlflow", "MLFlowLogger")
            from mlflow import MlflowClient

            if self.tracking_uri.startswith("sqlite:") and self.save_dir is not None:
                Path(self.save_dir).mkdir(parents=True, exist_ok=True)
            self._client = MlflowClient(self.tracking_uri)
        return self._client

    @property
    def experiment(self) -> Any:
        """The ``mlflow.MlflowClient`` (global rank 0; the first use starts the run)."""
        return self.client if self.ensure_run() else NoExperiment()

    @property
    def experiment_id(self) -> str | None:
        self.ensure_run()
        return self._experiment_id

    @property
    def name(self) -> str | None:
        """The experiment id, as in Lightning."""
        return self.experiment_id

    def start_run(self) -> str:
        client = self.client
        if self.continues_run:
            run_id = self._run_id
            assert run_id is not None  # continues_run: the constructor was given a run_id
            self._experiment_id = client.get_run(run_id).info.experiment_id
            client.update_run(run_id, status="RUNNING")
            return run_id
        found = client.get_experiment_by_name(self.experiment_name)
        if found is not None and found.lifecycle_stage == "deleted":
            raise ConfigError(
                "MLFlowLogger experiment_name", self.experiment_name, "an experiment not deleted",
                f"restore it (mlflow experiments restore -x {found.experiment_id}) or pick another name",
            )  # fmt: skip
        self._experiment_id = (
            found.experiment_id
            if found is not None
            else client.create_experiment(self.experiment_name, self.artifact_location)
        )
        tags = {key: str(value) for key, value in (self.tags or {}).items()}
        return client.create_run(self._experiment_id, tags=tags, run_name=self.run_name).info.run_id

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        client = self.experiment
        from mlflow.entities import Param

        kept = client.get_run(self.run_id).data.params if self.continues_run else {}
        items = [
            Param(k, str(v)[:MAX_PARAM_LENGTH]) for k, v in flatten(params).items() if k not in kept
        ]
        for start in range(0, len(items), 100):  # MLflow takes at most 100 params a call
            client.log_batch(self.run_id, params=items[start : start + 100], **self._batch_options)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        client = self.experiment
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(_key(k), float(v), now, step) for k, v in self.prefixed(metrics).items()]
        client.log_batch(self.run_id, metrics=items, **self._batch_options)

    def log_checkpoint(self, path: Path, aliases: list[str]) -> None:
        where = f"model/checkpoints/{path.stem}"
        if path.is_dir():
            self.client.log_artifacts(self._run_id, str(path), where)
        else:
            self.client.log_artifact(self._run_id, str(path), where)

    def finalize(self, status: str = "success") -> None:
        """Upload pending checkpoints and the run folder's config, then end the run with
        ``status`` ('success' -> FINISHED, 'failed' -> FAILED, or an MLflow status)."""
        if not self._started:
            return
        self.log_pending_checkpoints()
        for name in ("config.yaml", "hparams.yaml"):
            if (Path(self.log_dir) / name).is_file():
                self.client.log_artifact(self._run_id, str(Path(self.log_dir) / name))
        if self.synchronous is False:
            import mlflow

            mlflow.flush_async_logging()
        self.client.set_terminated(self._run_id, RUN_STATUS.get(status, status.upper()))


def _key(name: str) -> str:
    cleaned = _BAD_KEY.sub("", name)
    if cleaned != name:
        warnings.warn(f"MLFlowLogger: metric {name!r} logged as {cleaned!r} (MLflow's characters)")
    return cleaned
