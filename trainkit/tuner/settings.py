"""What the tuner's searches try, checked once: the arguments of ``Tuner.lr_find`` and
``LearningRateFinder`` (an LR range test), and of ``Tuner.scale_batch_size`` and
``BatchSizeFinder`` (a batch-size search)."""

from __future__ import annotations

from dataclasses import dataclass

from trainkit.errors import ConfigError, MisconfigurationError

RANGE_TEST_MODES = ("linear", "exponential")


@dataclass(frozen=True)
class RangeTestSettings:
    """What an LR range test tries: the arguments of ``LearningRateFinder`` and of
    ``Tuner.lr_find`` (described there), checked once here."""

    min_lr: float = 1e-8
    max_lr: float = 1
    num_training: int = 100
    mode: str = "exponential"
    early_stop_threshold: float | None = 4.0
    update_attr: bool = True
    attr_name: str = ""

    def __post_init__(self) -> None:
        if self.mode not in RANGE_TEST_MODES:
            raise ConfigError("LearningRateFinder mode", self.mode, f"one of {RANGE_TEST_MODES}")


BATCH_SIZE_MODES = ("power", "binsearch")


@dataclass(frozen=True)
class BatchSizeSearchSettings:
    """What a batch-size search tries: the arguments of ``BatchSizeFinder`` and of
    ``Tuner.scale_batch_size`` (described there), checked once here."""

    mode: str = "power"
    steps_per_trial: int = 3
    init_val: int = 2
    max_trials: int = 25
    batch_arg_name: str = "batch_size"
    margin: float = 0.05
    max_val: int = 8192

    def __post_init__(self) -> None:
        if self.mode not in BATCH_SIZE_MODES:
            raise ConfigError("BatchSizeFinder mode", self.mode, f"one of {BATCH_SIZE_MODES}")
        if not 0.0 <= self.margin < 1.0:
            raise MisconfigurationError(
                f"batch size finder margin {self.margin!r}; expected a float in [0, 1): the "
                "fraction the size found is reduced by in 'binsearch' mode"
            )
