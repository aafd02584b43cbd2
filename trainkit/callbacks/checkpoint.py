"""ModelCheckpoint: keep the best k checkpoints by a monitored metric, and ``last.ckpt``."""

from __future__ import annotations

import math
import os
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainkit.callbacks import checkpoint_files as files
from trainkit.callbacks.base import Checkpoint
from trainkit.distributed.comm import rank_zero_info
from trainkit.module import TrainModule  # never imports the callbacks: no circle

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


class ModelCheckpoint(Checkpoint):
    """Save the top k checkpoints by ``monitor`` (or the latest) and ``last.ckpt``.

    Saves every N epochs (the default: each epoch), every N steps or every time interval; a
    mid-epoch checkpoint resumes at the exact batch it was taken after."""

    CHECKPOINT_JOIN_CHAR = "-"
    CHECKPOINT_EQUALS_CHAR = "="
    CHECKPOINT_NAME_LAST = "last"
    FILE_EXTENSION = ".ckpt"
    STARTING_VERSION = 1
    order = 20  # runs after other callbacks, once epoch metrics are reduced

    def __init__(
        self,
        dirpath: str | os.PathLike | None = None,
        filename: str | None = None,
        monitor: str | None = None,
        verbose: bool = False,
        save_last: bool | Literal["link"] | None = True,
        save_top_k: int = 1,
        save_on_exception: bool = False,
        save_weights_only: bool = False,
        mode: str = "min",
        auto_insert_metric_name: bool = True,
        every_n_train_steps: int | None = None,
        train_time_interval: timedelta | None = None,
        every_n_epochs: int | None = None,
        save_on_train_epoch_end: bool | None = None,
        enable_version_counter: bool = True,
    ) -> None:
        """
        Args:
            dirpath: Folder of the checkpoints (default: the run's log folder / checkpoints).
            filename: Name template, e.g. '{epoch}-{val_loss:.2f}' (default '{epoch}-{step}').
            monitor: Logged metric that ranks checkpoints (None: keep the latest).
            verbose: Print each save and each score that did not make the top k.
            save_last: Also keep last.ckpt, the newest state, for --ckpt_path last
                (refreshed at every epoch end); 'link': a symlink when it equals a saved file.
            save_top_k: How many best checkpoints to keep (-1: all, 0: none).
            save_on_exception: Save a checkpoint when fit raises an exception.
            save_weights_only: Save the weights and loop position only (no optimizer,
                scheduler or callback state: such a checkpoint cannot resume a fit).
            mode: 'min' or 'max': which way the monitored metric improves.
            auto_insert_metric_name: Write 'epoch=3' rather than '3' in filenames.
            every_n_train_steps: Save after every N optimizer steps, mid-epoch.
            train_time_interval: Save when this much training time has passed since the last save.
            every_n_epochs: Save every N epochs (0: never at epoch ends); the default when no
                trigger is set is 1. At most one of the three triggers may be set.
            save_on_train_epoch_end: Save at the training epoch end (True) or after each
                validation (False); None: at epoch end when validation runs once per epoch.
            enable_version_counter: Add '-v1', '-v2' to a name that exists already, instead of
                overwriting it.
        """
        files.check_choices(mode, save_last, save_top_k, monitor)
        self.dirpath = os.path.realpath(os.path.expanduser(dirpath)) if dirpath else None
        self.filename = filename
        self.monitor = monitor
        self.verbose = verbose
        self.save_last = save_last
        self.save_top_k = save_top_k
        self.save_on_exception = save_on_exception
        self.save_weights_only = save_weights_only
        self.mode = mode
        self.auto_insert_metric_name = auto_insert_metric_name
        self.every_n_train_steps, self.every_n_epochs = files.triggers(
            every_n_train_steps, every_n_epochs, train_time_interval
        )
        self.train_time_interval = train_time_interval
        self._save_on_train_epoch_end = save_on_train_epoch_end
        self._enable_version_counter = enable_version_counter
        self._last_global_step_saved = 0  # nothing to save before a step was taken
        self._last_time_checked: float | None = None
        self._deferred = False  # a step/time save waits for its monitored metric
        self._said_not_finite = False  # weights with NaN/inf were reported
        self._validated = False  # a validation batch ran since the last validation start
        self._said_not_logged: set[str] = set()  # each text once, as Lightning's warning cache
        self._last_checkpoint_saved = ""  # the newest file saved (last.ckpt aside)
        # Lightning wrote last.ckpt without a top-k file (at a step save or a deferred one): with
        # neither, as Lightning, last.ckpt is written at the fit's end
        self._saved_as_lightning = False
        self.current_score: torch.Tensor | None = None
        self.best_k_models: dict[str, torch.Tensor] = {}
        self.kth_best_model_path = ""
        self.kth_value = torch.tensor(math.inf if mode == "min" else -math.inf)
        self.best_model_path = ""
        self.best_model_score: torch.Tensor | None = None
        self._earlier_best: tuple[str, torch.Tensor] | None = None  # a resumed run's, elsewhere
        self.last_model_path = ""

    @property
    def state_key(self) -> str:
        """Distinct per monitor, mode and trigger, so several ModelCheckpoints keep their states."""
        settings = {
            "monitor": self.monitor,
            "mode": self.mode,
            "every_n_train_steps": self.every_n_train_steps,
            "every_n_epochs": self.every_n_epochs,
            "train_time_interval": self.train_time_interval,
        }
        return f"{type(self).__qualname__}{settings!r}"

    # ---- when to save --------------------------------------------------------------------------
    def setup(self, trainer: Trainer, module: TrainModule, stage: str) -> None:
        if self.dirpath is None:
            self.dirpath = str(Path(trainer.log_dir) / "checkpoints")
        self.dirpath = trainer.strategy.broadcast(self.dirpath)

    def on_train_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._last_time_checked = time.monotonic()

    def on_train_batch_end(
        self,
        trainer: Trainer,
        module: TrainModule,
        outputs: object,
        batch: object,
        batch_idx: int,
    ) -> None:
        step_due = (
            self.every_n_train_steps >= 1 and trainer.global_step % self.every_n_train_steps == 0
        )
        time_due = False
        if self.train_time_interval is not None and self._last_time_checked is not None:
            now = time.monotonic()
            passed = now - self._last_time_checked >= self.train_time_interval.total_seconds()
            time_due = bool(trainer.strategy.broadcast(passed))  # rank 0's clock decides
            if time_due:
                self._last_time_checked = now
        if not (step_due or time_due):
            return
        metrics = files.monitor_candidates(trainer)
        fresh = self.monitor in metrics and (
            self._saves_on_train_epoch_end(trainer)
            or not files.validation_follows(trainer, batch_idx)
        )
        if self.monitor is not None and not fresh:
            self._deferred = True  # saved after the validation that logs it (Lightning's order:
            return  # before the check of a save at this step)
        if self._skip(trainer) or not self._finite(trainer, module):
            return
        if step_due and not module.automatic_optimization:
            files.say_post_step_weights(trainer, self.every_n_train_steps)
        saved = self._save_top_k(trainer, metrics)
        self._save_last(trainer, metrics, saved)
        self._saved_as_lightning = True

    def on_validation_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._validated = self._validated and trainer.sanity_checking

    def on_validation_batch_end(self, trainer: Trainer, *args: object, **kw: object) -> None:
        self._validated = self._validated or not trainer.sanity_checking

    def on_train_epoch_end(self, trainer: Trainer, module: TrainModule) -> None:
        if self._skip_stage(trainer) or not self._finite(trainer, module):
            return
        metrics = files.monitor_candidates(trainer)
        saved = False
        if (
            self._saves_on_train_epoch_end(trainer)
            and self._epoch_due(trainer)
            and self._last_global_step_saved != trainer.global_step
        ):
            saved = self._save_top_k(trainer, metrics)
        # last.ckpt: the completed epoch, every epoch (trainkit's own save, not counted as this
        # step's: a validation's top-k save at this step still comes)
        self._save_last(trainer, metrics, saved, counts=saved)

    def on_validation_end(self, trainer: Trainer, module: TrainModule) -> None:
        # as Lightning: nothing when saving at epoch ends (a deferred step save then waits for
        # a batch end that has its metric) or when this step was saved
        skip = self._skip(trainer) or self._saves_on_train_epoch_end(trainer)
        if skip or not self._finite(trainer, module):
            return
        metrics = files.monitor_candidates(trainer)
        if self._deferred or self._epoch_due(trainer):  # deferred: still missing is an error
            self._saved_as_lightning |= self._deferred
            self._deferred = False
            saved = self._save_top_k(trainer, metrics)
            self._save_last(trainer, metrics, saved)

    def on_train_end(self, trainer: Trainer, module: TrainModule) -> None:
        # as Lightning: a fit none of whose events saved (no validation to save after, no
        # saves at epoch ends) writes last.ckpt at its end, of the finished fit
        if self._saved_as_lightning or self._last_checkpoint_saved or self._skip_stage(trainer):
            return
        if self.save_last and self._finite(trainer, module):
            self._save_last(trainer, files.monitor_candidates(trainer), just_saved=False)

    def on_exception(self, trainer: Trainer, module: TrainModule, exception: BaseException) -> None:
        if (
            not self.save_on_exception
            or self.dirpath is None
            or self._skip_stage(trainer)
            or self._last_global_step_saved == trainer.global_step
        ):
            return
        if trainer.world_size > 1:  # the other ranks are not saving: a checkpoint needs them
            rank_zero_info("ModelCheckpoint: no checkpoint on exception in a multi-rank run")
            return
        if not self._finite(trainer, module):
            return
        metrics = files.monitor_candidates(trainer)
        filepath = self.format_checkpoint_name(metrics)
        self._save_checkpoint(trainer, filepath)
        self._save_last(trainer, metrics)
        rank_zero_info(
            f"An {type(exception).__name__} was raised with message: {exception}, saved "
            f"checkpoint to {filepath}"
        )

    def _skip_stage(self, trainer: Trainer) -> bool:
        return bool(trainer.fast_dev_run) or trainer.state.fn != "fit" or trainer.sanity_checking

    def _finite(self, trainer: Trainer, module: TrainModule) -> bool:
        """Weights with NaN or infinity never replace a checkpoint (said once; nothing saved)."""
        finite = files.weights_are_finite(trainer, module, say=not self._said_not_finite)
        self._said_not_finite |= not finite
        return finite

    def _skip(self, trainer: Trainer) -> bool:
        return self._skip_stage(trainer) or self._last_global_step_saved == trainer.global_step

    def _epoch_due(self, trainer: Trainer) -> bool:
        every = self.every_n_epochs
        return every >= 1 and ((trainer.current_epoch + 1) % every == 0 or trainer.is_final_epoch)

    def _saves_on_train_epoch_end(self, trainer: Trainer) -> bool:
        """Lightning's rule: at epoch end unless validation runs more than once an epoch or
        not every epoch (then after each validation)."""
        if self._save_on_train_epoch_end is not None:
            return self._save_on_train_epoch_end
        if trainer.check_val_every_n_epoch != 1:
            return False
        if sum(trainer.num_val_batches) == 0:  # none loaded yet, or all empty
            return True
        return trainer.val_check_interval == 1.0

    # ---- what to save --------------------------------------------------------------------------
    def _save_top_k(self, trainer: Trainer, metrics: dict[str, Any]) -> bool:
        """Save a top-k checkpoint if it qualifies; returns whether one was written."""
        if self.save_top_k == 0:
            return False
        if self.monitor is None:
            filepath = self._free_name(trainer, metrics)
            previous, self.best_model_path = self.best_model_path, filepath
            self._save_checkpoint(trainer, filepath)
            if self.save_top_k == 1 and previous and self._removable(previous, filepath):
                files.remove_checkpoint(trainer, previous)
            return True
        if self.monitor not in metrics:  # Lightning: an error once validation ran, else a warning
            error = files.monitor_not_logged(self.monitor, metrics)
            if self._validated:
                raise error
            if str(error) not in self._said_not_logged and trainer.is_global_zero:
                warnings.warn(f"{error} No checkpoint is saved until it is logged.", stacklevel=2)
            self._said_not_logged.add(str(error))
            return False
        current = torch.as_tensor(metrics[self.monitor], dtype=torch.float32).detach().cpu()
        self.current_score = current
        if self._qualifies(trainer, current):
            self._update_best_and_save(trainer, current, metrics)
            return True
        if self.verbose:
            rank_zero_info(
                f"Epoch {metrics['epoch']:d}, global step {metrics['step']:d}: "
                f"{self.monitor!r} was not in top {self.save_top_k}"
            )
        return False

    def _qualifies(self, trainer: Trainer, current: torch.Tensor) -> bool:
        if self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return True
        better = bool(current < self.kth_value if self.mode == "min" else current > self.kth_value)
        if trainer.world_size > 1:  # every rank must agree
            better = all(trainer.strategy.all_gather_object(better))
        return better

    def _update_best_and_save(
        self, trainer: Trainer, current: torch.Tensor, metrics: dict[str, Any]
    ) -> None:
        k = len(self.best_k_models) + 1 if self.save_top_k == -1 else self.save_top_k
        dropped = None
        if len(self.best_k_models) == k:
            dropped = self.kth_best_model_path
            self.best_k_models.pop(dropped)
        if torch.isnan(current):  # a NaN score ranks worst
            current = torch.tensor(math.inf if self.mode == "min" else -math.inf)
        filepath = self._free_name(trainer, metrics, dropped)
        self.current_score = current
        self.best_k_models[filepath] = current
        worst, best = (max, min) if self.mode == "min" else (min, max)
        if len(self.best_k_models) == k:
            self.kth_best_model_path = worst(self.best_k_models, key=self.best_k_models.__getitem__)
            self.kth_value = self.best_k_models[self.kth_best_model_path]
        path = best(self.best_k_models, key=self.best_k_models.__getitem__)
        self.best_model_path, self.best_model_score = files.best_of(
            self.mode, self._earlier_best, path, self.best_k_models[path]
        )
        if self.verbose:
            rank_zero_info(
                f"Epoch {metrics['epoch']:d}, global step {metrics['step']:d}: {self.monitor!r} "
                f"reached {current.item():0.5f} (best {self.best_model_score.item():0.5f}), "
                f"saving model to {filepath!r} as top {k}"
            )
        self._save_checkpoint(trainer, filepath)
        if dropped and self._removable(dropped, filepath):
            files.remove_checkpoint(trainer, dropped)

    def _save_last(
        self,
        trainer: Trainer,
        metrics: dict[str, Any],
        just_saved: bool = True,
        counts: bool = True,
    ) -> None:
        """last.ckpt (CHECKPOINT_NAME_LAST): a link to the file just saved with 'link', else a
        full checkpoint of the current state; ``counts``: it is this step's save (no other save
        comes at this step)."""
        if not self.save_last:
            return
        filepath = self.format_checkpoint_name(metrics, self.CHECKPOINT_NAME_LAST)
        previous, self.last_model_path = self.last_model_path, filepath
        newest = self._last_checkpoint_saved
        if self.save_last == "link" and just_saved and newest and newest != filepath:
            files.link_checkpoint(trainer, newest, filepath)
        else:
            counted = self._last_global_step_saved
            self._save_checkpoint(trainer, filepath)
            if not counts:
                self._last_global_step_saved = counted
        if previous and previous != filepath and self._removable(previous, filepath):
            files.remove_checkpoint(trainer, previous)

    def _save_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        trainer.save_checkpoint(filepath, self.save_weights_only)
        self._last_global_step_saved = trainer.global_step
        if Path(filepath).name != f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}":
            self._last_checkpoint_saved = filepath
        files.notify_loggers(trainer, self)

    def _removable(self, previous: str, current: str) -> bool:
        kept = previous in self.best_k_models or previous == self.last_model_path
        folder = self.dirpath  # set in setup: only files inside it are ever removed
        return (
            previous != current
            and not kept
            and folder is not None
            and files.inside(folder, previous)
        )

    # ---- names ---------------------------------------------------------------------------------
    def format_checkpoint_name(
        self,
        metrics: dict[str, Any],
        filename: str | None = None,
        ver: int | None = None,
        prefix: str = "",
    ) -> str:
        """The path for a checkpoint: ``dirpath/{filename template filled}[-v{ver}].ckpt``."""
        name = files.fill_template(
            filename or self.filename or "{epoch}-{step}", metrics, self.auto_insert_metric_name
        )
        if prefix:
            name = f"{prefix}{self.CHECKPOINT_JOIN_CHAR}{name}"
        if ver is not None:
            name = f"{name}{self.CHECKPOINT_JOIN_CHAR}v{ver}"
        name += self.FILE_EXTENSION
        return str(Path(self.dirpath) / name) if self.dirpath else name

    def format_path(self, epoch: int, step: int, metrics: dict[str, float]) -> str:
        """Fill the filename template: ``{epoch}-{val_loss:.2f}`` -> ``epoch=3-val_loss=0.12``."""
        return self.format_checkpoint_name({"epoch": epoch, "step": step, **metrics})

    def _free_name(
        self, trainer: Trainer, metrics: dict[str, Any], replaced: str | None = None
    ) -> str:
        """The formatted name, versioned ('-v1', ...) while a file of that name exists."""
        first = self.STARTING_VERSION if self._enable_version_counter else None
        return files.free_name(trainer, self.format_checkpoint_name, metrics, replaced, first)

    # ---- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "monitor": self.monitor,
            "best_model_score": self.best_model_score,
            "best_model_path": self.best_model_path,
            "current_score": self.current_score,
            "dirpath": self.dirpath,
            "best_k_models": dict(self.best_k_models),
            "kth_best_model_path": self.kth_best_model_path,
            "kth_value": self.kth_value,
            "last_model_path": self.last_model_path,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.dirpath is None:
            self.dirpath = state_dict.get("dirpath")
        if state_dict.get("dirpath") == self.dirpath:
            self.best_k_models = {
                k: torch.as_tensor(v) for k, v in state_dict["best_k_models"].items()
            }
            self.best_model_score = files.tensor_or_none(state_dict["best_model_score"])
            self.kth_best_model_path = state_dict.get("kth_best_model_path", "")
            self.kth_value = torch.as_tensor(state_dict.get("kth_value", self.kth_value))
            self.last_model_path = state_dict.get("last_model_path", "")
        self.best_model_path = state_dict["best_model_path"]
        self._earlier_best = files.carried_best(
            state_dict, self.best_k_models, self.monitor, self.dirpath
        )
        if self._earlier_best is not None:
            self.best_model_score = self._earlier_best[1]
