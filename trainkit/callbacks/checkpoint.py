"""ModelCheckpoint: keep the best k checkpoints by a monitored metric, and ``last.ckpt``."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError

_FIELD = re.compile(r"\{([A-Za-z_][\w/.-]*)(:[^}]*)?\}")


class ModelCheckpoint(Callback):
    """Save checkpoints at epoch ends (and every N steps): top-k by ``monitor`` (or the latest),
    plus ``last.ckpt``; a mid-epoch checkpoint resumes at the exact batch it was taken after."""

    order = 20  # runs after other callbacks, once epoch metrics are reduced

    def __init__(
        self,
        dirpath: str | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        mode: str = "min",
        save_top_k: int = 1,
        save_last: bool = True,
        every_n_epochs: int = 1,
        every_n_train_steps: int = 0,
        auto_insert_metric_name: bool = True,
    ) -> None:
        """
        Args:
            dirpath: Folder of the checkpoints (default: the run's log folder / checkpoints).
            filename: Name template, e.g. '{epoch}-{val_loss:.2f}' (default '{epoch}-{step}').
            monitor: Logged metric that ranks checkpoints (None: keep the latest).
            mode: 'min' or 'max': which way the monitored metric improves.
            save_top_k: How many best checkpoints to keep (-1: all, 0: none).
            save_last: Also keep last.ckpt, the newest state, for --ckpt_path last.
            every_n_epochs: Save at the end of every N-th epoch.
            every_n_train_steps: Also save after every N optimizer steps, mid-epoch (0: off).
            auto_insert_metric_name: Write 'epoch=3' rather than '3' in filenames.
        """
        if mode not in ("min", "max"):
            raise ConfigError("ModelCheckpoint mode", mode, "'min' or 'max'")
        if save_top_k < -1:
            raise ConfigError(
                "ModelCheckpoint save_top_k", save_top_k, "-1 (all), 0 or a positive int"
            )
        if every_n_epochs < 1:
            raise ConfigError("ModelCheckpoint every_n_epochs", every_n_epochs, "an int >= 1")
        if every_n_train_steps < 0:
            raise ConfigError(
                "ModelCheckpoint every_n_train_steps", every_n_train_steps, "0 (off) or an int >= 1"
            )
        self.dirpath = dirpath
        self.filename = filename
        self.monitor = monitor
        self.mode = mode
        self.save_top_k = save_top_k
        self.save_last = save_last
        self.every_n_epochs = every_n_epochs
        self.every_n_train_steps = every_n_train_steps
        self._saved_at_step = -1
        self.auto_insert_metric_name = auto_insert_metric_name
        self.best_k_models: dict[str, float] = {}
        self.best_model_path = ""
        self.best_model_score: float | None = None
        self.last_model_path = ""

    def setup(self, trainer: Any, module: Any, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = str(Path(trainer.log_dir) / "checkpoints")

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        every = self.every_n_train_steps
        step = trainer.global_step
        if every and step % every == 0 and step != self._saved_at_step:
            self._saved_at_step = step
            self._save(trainer)

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        if (trainer.current_epoch + 1) % self.every_n_epochs and not trainer.is_final_epoch:
            return
        self._save(trainer)

    def _save(self, trainer: Any) -> None:
        metrics = {k: _as_float(v) for k, v in trainer.callback_metrics.items()}
        if self.save_top_k != 0:
            self._save_top_k(trainer, metrics)
        if self.save_last:
            self.last_model_path = str(Path(self.dirpath) / "last.ckpt")
            trainer.save_checkpoint(self.last_model_path)

    def _save_top_k(self, trainer: Any, metrics: dict[str, float]) -> None:
        filepath = self.format_path(trainer.current_epoch, trainer.global_step, metrics)
        if self.monitor is None:
            if self.save_top_k == 1:
                self._remove(trainer, [p for p in self.best_k_models if p != filepath])
                self.best_k_models = {}
            self.best_k_models[filepath] = float("nan")
            self.best_model_path = filepath
            trainer.save_checkpoint(filepath)
            return
        if self.monitor not in metrics:
            raise KeyError(
                f"ModelCheckpoint(monitor={self.monitor!r}) found no such logged metric; "
                f"logged: {sorted(metrics)}"
            )
        score = metrics[self.monitor]
        if math.isnan(score) or not self._improves(score):
            return
        self.best_k_models[filepath] = score
        if self.save_top_k != -1 and len(self.best_k_models) > self.save_top_k:
            worst = max(self.best_k_models, key=self._badness)
            self.best_k_models.pop(worst)
            self._remove(trainer, [worst])
        self.best_model_path = min(self.best_k_models, key=self._badness)
        self.best_model_score = self.best_k_models[self.best_model_path]
        trainer.save_checkpoint(filepath)

    def _improves(self, score: float) -> bool:
        if self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return True
        worst = max(self.best_k_models.values(), key=lambda s: s if self.mode == "min" else -s)
        return score < worst if self.mode == "min" else score > worst

    def _badness(self, path: str) -> float:
        score = self.best_k_models[path]
        return score if self.mode == "min" else -score

    @staticmethod
    def _remove(trainer: Any, paths: list[str]) -> None:
        if trainer.is_global_zero:
            for path in paths:
                if Path(path).is_dir():  # a sharded checkpoint folder
                    shutil.rmtree(path)
                else:
                    Path(path).unlink(missing_ok=True)

    def format_path(self, epoch: int, step: int, metrics: dict[str, float]) -> str:
        """Fill the filename template: ``{epoch}-{val_loss:.2f}`` -> ``epoch=3-val_loss=0.12``."""
        template = self.filename or "{epoch}-{step}"
        values = {"epoch": epoch, "step": step, **metrics}

        def fill(match: re.Match) -> str:
            name, spec = match.group(1), match.group(2) or ""
            value = values.get(name, float("nan"))
            text = format(value, spec[1:]) if spec else str(value)
            return f"{name}={text}" if self.auto_insert_metric_name else text

        return str(Path(self.dirpath) / (_FIELD.sub(fill, template) + ".ckpt"))

    def state_dict(self) -> dict[str, Any]:
        return {
            "monitor": self.monitor,
            "best_model_path": self.best_model_path,
            "best_model_score": self.best_model_score,
            "best_k_models": dict(self.best_k_models),
            "last_model_path": self.last_model_path,
            "dirpath": self.dirpath,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.dirpath is None:
            self.dirpath = state_dict.get("dirpath")
        if state_dict.get("dirpath") == self.dirpath:
            self.best_k_models = dict(state_dict["best_k_models"])
            self.best_model_path = state_dict["best_model_path"]
            self.best_model_score = state_dict["best_model_score"]
        self.last_model_path = state_dict.get("last_model_path", "")


def _as_float(value: Any) -> float:
    return value.item() if hasattr(value, "item") else float(value)
