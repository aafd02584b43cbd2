"""Tuner: Lightning's ``Tuner(trainer)``, finding a learning rate (``lr_find``) or the largest
batch size that fits (``scale_batch_size``) by running a stage that ends once the search is done."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from trainkit.errors import MisconfigurationError
from trainkit.tuner.tunable import TunableTrainer

if TYPE_CHECKING:
    from trainkit.callbacks.base import Callback
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule
    from trainkit.tuner.batch_size_finder import BatchSizeFinder
    from trainkit.tuner.learning_rate_finder import LearningRateFinder
    from trainkit.tuner.lr_range_test import LRFinder

Method = Literal["fit", "validate", "test", "predict"]
METHODS = ("fit", "validate", "test", "predict")


class Tuner:
    """Tune a model's learning rate or batch size with ``trainer`` (Lightning's Tuner)."""

    def __init__(self, trainer: TunableTrainer) -> None:
        self._trainer = trainer

    def scale_batch_size(
        self,
        model: TrainModule,
        train_dataloaders: object = None,
        val_dataloaders: object = None,
        dataloaders: object = None,
        datamodule: DataModule | None = None,
        method: Method = "fit",
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
    ) -> int | None:
        """The largest batch size (up to ``max_val``) whose ``steps_per_trial`` steps of
        ``method`` run without running out of memory, written to ``batch_arg_name`` in the model,
        its hparams, the datamodule or its hparams ('power': double until a size fails;
        'binsearch': then bisect, and keep ``margin`` of headroom). Under ddp every rank ends
        with rank 0's size. None under ``fast_dev_run``."""
        from trainkit.tuner.attributes import set_attribute
        from trainkit.tuner.batch_size_finder import BatchSizeFinder

        check_tuner_configuration(train_dataloaders, val_dataloaders, dataloaders, method)
        self._refuse_second(BatchSizeFinder)
        finder = BatchSizeFinder(
            mode=mode,
            steps_per_trial=steps_per_trial,
            init_val=init_val,
            max_trials=max_trials,
            batch_arg_name=batch_arg_name,
            margin=margin,
            max_val=max_val,
        )
        self._run_with(
            finder, model, method, train_dataloaders, val_dataloaders, dataloaders, datamodule
        )
        found = finder.optimal_batch_size
        if found is not None:  # also where the ranks were spawned processes
            set_attribute(model, batch_arg_name, found, datamodule or self._trainer.datamodule)
        return found

    def lr_find(
        self,
        model: TrainModule,
        train_dataloaders: object = None,
        val_dataloaders: object = None,
        dataloaders: object = None,
        datamodule: DataModule | None = None,
        method: Method = "fit",
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> LRFinder | None:
        """An LR range test: ``num_training`` steps with the rate rising from ``min_lr`` to
        ``max_lr`` ('exponential' or 'linear'), stopped once the smoothed loss exceeds
        ``early_stop_threshold`` times the best; the weights and optimizer are restored after.
        With ``update_attr`` the suggested rate is written to the model's ``lr``/
        ``learning_rate`` (or ``attr_name``). Under ddp rank 0 decides. None under
        ``fast_dev_run``."""
        from trainkit.tuner.attributes import set_attribute
        from trainkit.tuner.learning_rate_finder import LearningRateFinder
        from trainkit.tuner.lr_range_test import lr_attribute

        if method != "fit":
            raise MisconfigurationError(
                "method='fit' is the only valid configuration to run lr finder."
            )
        check_tuner_configuration(train_dataloaders, val_dataloaders, dataloaders, method)
        self._refuse_second(LearningRateFinder)
        finder = LearningRateFinder(
            min_lr=min_lr,
            max_lr=max_lr,
            num_training_steps=num_training,
            mode=mode,
            early_stop_threshold=early_stop_threshold,
            update_attr=update_attr,
            attr_name=attr_name,
        )
        self._run_with(finder, model, method, train_dataloaders, val_dataloaders, None, datamodule)
        found = finder.optimal_lr
        if update_attr and found is not None:  # also where the ranks were spawned processes
            data = datamodule or self._trainer.datamodule
            index = found.steepest_index()
            if index is not None:
                suggested = found.results["lr"][index]
                set_attribute(model, lr_attribute(model, attr_name, data), suggested, data)
        return found

    def _refuse_second(self, kind: type[Callback]) -> None:
        if any(isinstance(callback, kind) for callback in self._trainer.callbacks):
            raise ValueError(
                f"Trainer is already configured with a `{kind.__name__}` callback. Please "
                "remove it if you want to use the Tuner."
            )

    def _run_with(
        self,
        finder: LearningRateFinder | BatchSizeFinder,
        model: TrainModule,
        method: Method,
        train_dataloaders: object,
        val_dataloaders: object,
        dataloaders: object,
        datamodule: DataModule | None,
    ) -> None:
        """Run ``method`` with ``finder`` first among the callbacks; it ends the stage once its
        search is done (``early_exit``), and leaves the callbacks after."""
        trainer = self._trainer
        finder.early_exit = True
        callbacks = trainer.callbacks
        callbacks.insert(0, finder)
        try:
            if method == "fit":
                trainer.fit(model, train_dataloaders, val_dataloaders, datamodule)
            elif method == "validate":
                trainer.validate(model, dataloaders, datamodule=datamodule)
            elif method == "test":
                trainer.test(model, dataloaders, datamodule=datamodule)
            else:
                trainer.predict(model, dataloaders, datamodule=datamodule)
        finally:
            callbacks[:] = [callback for callback in callbacks if callback is not finder]


def check_tuner_configuration(
    train_dataloaders: object, val_dataloaders: object, dataloaders: object, method: str
) -> None:
    """The loader arguments that go with ``method``, as Lightning checks them."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is invalid. Should be one of {METHODS}.")
    if method == "fit":
        if dataloaders is not None:
            raise MisconfigurationError(
                f"In tuner with method={method!r}, `dataloaders` argument should be None, please "
                "consider setting `train_dataloaders` and `val_dataloaders` instead."
            )
    elif train_dataloaders is not None or val_dataloaders is not None:
        raise MisconfigurationError(
            f"In tuner with `method`={method!r}, `train_dataloaders` and `val_dataloaders` "
            "arguments should be None, please consider setting `dataloaders` instead."
        )
