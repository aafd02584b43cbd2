"""The batch-size search: from inside a running stage, run a few steps at growing batch sizes
until one runs out of memory ('power': double until then; 'binsearch': then bisect between the
last size that fitted and the first that did not), write the size found to the model's or
datamodule's ``batch_size``, and put the stage back as it was (``search.py``).

Under a process group every rank runs each trial; the ranks agree that a trial failed when any
of them ran out of memory, and rank 0's next size is every rank's."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import MisconfigurationError
from trainkit.loops.fit import FitLoop
from trainkit.state import RunState
from trainkit.tuner.attributes import get_attribute, set_attribute
from trainkit.tuner.search import Search, free_memory
from trainkit.tuner.trials import EvalTrials
from trainkit.tuner.tunable import TunableTrainer

if TYPE_CHECKING:
    from trainkit.tuner.settings import BatchSizeSearchSettings

OUT_OF_MEMORY = ("out of memory", "can't allocate memory", "CUDNN_STATUS_NOT_SUPPORTED")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says a device or the host ran out of memory (CUDA, CPU allocator,
    cuDNN's way of saying it)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(text in str(error) for text in OUT_OF_MEMORY)


class BatchSizeSearch:
    """One search: the trials, the size of each, and writing it where the loaders read it."""

    def __init__(
        self,
        state: RunState,
        search: Search,
        batch_arg_name: str,
        steps_per_trial: int,
        max_val: int,
        eval_trials: EvalTrials | None,
    ) -> None:
        self.state = state
        self.search = search
        self.name = batch_arg_name
        self.steps_per_trial = steps_per_trial
        self.max_val = max_val
        self.eval_trials = eval_trials  # None: a fit's trials

    # ---- trials ---------------------------------------------------------------------------------
    def setup(self) -> None:
        """The loop limits every trial runs under."""
        steps = self.steps_per_trial
        if self.eval_trials is None:
            self.state.limits = self.search.limits(
                limit_train_batches=1.0,
                limit_val_batches=steps,
                max_steps=self.search.start_step + steps,
            )

    def fails(self) -> bool:
        """Run one trial at the current size; whether it ran out of memory (on any rank)."""
        state = self.state
        self.search.start_position()
        failed = False
        try:
            if self.eval_trials is not None:
                self.eval_trials.run(self.steps_per_trial)
            else:
                FitLoop(state).train()
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            failed = True
        free_memory(state)
        flag = torch.tensor([int(failed)], device=state.strategy.root_device)
        return bool(state.strategy.reduce(flag, "max").item())

    # ---- sizes ----------------------------------------------------------------------------------
    def current(self) -> int:
        return int(get_attribute(self.state.given.module, self.name, self.state.given.datamodule))  # type: ignore[arg-type]

    def adjust(
        self,
        factor: float = 1.0,
        value: int | None = None,
        desc: str | None = None,
        max_val: int = 8192,
    ) -> tuple[int, bool]:
        """Set the size to ``value`` (or the current one times ``factor``, at most ``max_val``);
        returns it and whether it changed. A size already as large as the dataset stays."""
        size = self.current()
        length = self.dataset_length()
        if length is not None and size >= length:
            rank_zero_info(
                f"The batch size {size} is greater or equal than the length of your dataset: "
                f"{length}."
            )
            return size, False
        new_size = value if value is not None else int(size * factor)
        if new_size > max_val:
            if desc:
                rank_zero_info(
                    f"Batch size {new_size} exceeds max_val limit {max_val}, capping at {max_val}"
                )
            new_size = max_val
        if desc:
            rank_zero_info(f"Batch size {size} {desc}, trying batch size {new_size}")
        new_size = self.state.strategy.broadcast(new_size)  # rank 0 decides for every rank
        self.write(new_size)
        return new_size, new_size != size

    def write(self, size: int) -> None:
        """``size`` into every holder of the attribute."""
        set_attribute(self.state.given.module, self.name, size, self.state.given.datamodule)

    def dataset_length(self) -> int | None:
        """Samples in the trial's dataset(s) (None for iterable datasets)."""
        state = self.state
        if self.eval_trials is not None:
            loaders = self.eval_trials.loaders
        else:
            loaders = [state.given.train_loader]
        lengths = [dataset_size(loader) for loader in loaders]
        if not lengths or any(length is None for length in lengths):
            return None
        known = [length for length in lengths if length is not None]
        return sum(known) if self.eval_trials is not None else max(known)

    def reload(self) -> None:
        """New loaders at the current size (from the module's or datamodule's hooks)."""
        if self.eval_trials is not None:
            self.eval_trials.reload()
            return
        state = self.state
        reload = require_reload(state)
        val = reload("val") if state.limits.limit_val_batches != 0 else []
        state.given = replace(state.given, train_loader=reload("train")[0], val_loaders=val)


def dataset_size(loader: object) -> int | None:
    dataset = getattr(loader, "dataset", None)
    try:
        return len(dataset)  # type: ignore[arg-type]
    except TypeError:
        return None


def require_reload(state: RunState) -> Callable[[str], list[object]]:
    """The stage's loader source; the loaders given straight to the stage cannot be resized."""
    if state.given.reload_loaders is None:
        raise MisconfigurationError(
            "The Batch size finder cannot be used with dataloaders passed directly to "
            f"`.{state.trainer_state.fn or 'fit'}()`. Please disable the feature or incorporate the "
            "dataloader into your LightningModule or LightningDataModule."
        )
    return state.given.reload_loaders


def run_power_scaling(search: BatchSizeSearch, new_size: int, max_trials: int) -> int:
    """Double the size after each trial that fits; after the first that does not, halve it and
    stop (keep halving while nothing has fitted yet)."""
    any_success = False
    for trial in range(max_trials):
        if new_size >= search.max_val:
            rank_zero_info(
                f"Reached the maximum batch size limit of {search.max_val}. Stopping search."
            )
            break
        if search.fails():
            new_size, _ = search.adjust(factor=0.5, desc="failed")
            search.reload()
            if any_success:
                break
            continue
        if trial + 1 >= max_trials:
            break
        new_size, changed = search.adjust(factor=2.0, desc="succeeded")
        if not changed:
            break
        search.reload()
        any_success = True
    return new_size


def run_binsearch_scaling(
    search: BatchSizeSearch, new_size: int, max_trials: int, margin: float
) -> int:
    """Double the size until a trial does not fit, then bisect between the last size that fitted
    and the first that did not; the size found is reduced by ``margin``."""
    low, high, count = 1, None, 0
    max_val = search.max_val
    while True:
        if new_size >= max_val:
            rank_zero_info(f"Reached the maximum batch size limit of {max_val}. Stopping search.")
            break
        if search.fails():
            high = new_size
            new_size, _ = search.adjust(value=(high + low) // 2, desc="failed")
            search.reload()
            if high - low <= 1:
                break
            continue
        count += 1
        if count >= max_trials:
            break
        low = new_size
        if high:
            if high - low <= 1:
                break
            new_size, changed = search.adjust(
                value=(high + low) // 2, desc="succeeded", max_val=max_val
            )
        else:
            new_size, changed = search.adjust(factor=2.0, desc="succeeded", max_val=max_val)
        if not changed:
            break
        search.reload()
    if margin > 0:
        reduced = max(1, math.floor(new_size * (1 - margin)))
        if reduced != new_size:
            rank_zero_info(
                f"Applying margin of {margin:.1%}, reducing batch size from {new_size} to {reduced}"
            )
            new_size = reduced
            search.write(new_size)
    return new_size


def scale_batch_size(trainer: TunableTrainer, settings: BatchSizeSearchSettings) -> int | None:
    """Find the largest batch size that fits, from where the running stage is; the stage goes on
    with its loaders at that size. None under ``fast_dev_run``."""
    if trainer.fast_dev_run:
        if trainer.is_global_zero:
            import warnings

            warnings.warn("Skipping batch size scaler since `fast_dev_run` is enabled.")
        return None
    state = trainer.run_state
    eval_trials = None
    if state.trainer_state.fn in (None, "fit"):
        require_reload(state)
    else:
        eval_trials = EvalTrials(state)
        eval_trials.source()  # loaders given straight to the stage cannot be resized
    with Search(state, "scale_batch_size") as search:
        state.given = replace(state.given, callbacks=[])
        finder = BatchSizeSearch(
            state,
            search,
            settings.batch_arg_name,
            settings.steps_per_trial,
            settings.max_val,
            eval_trials,
        )
        finder.setup()
        new_size, _ = finder.adjust(value=settings.init_val)
        finder.reload()
        if settings.mode == "power":
            new_size = run_power_scaling(finder, new_size, settings.max_trials)
        else:
            new_size = run_binsearch_scaling(finder, new_size, settings.max_trials, settings.margin)
        rank_zero_info(
            f"Finished batch size finder, will continue with full run using batch size {new_size}"
        )
    finder.reload()  # the stage goes on with loaders at the size found
    return new_size
