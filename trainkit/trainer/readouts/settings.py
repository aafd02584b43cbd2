"""The Trainer's own settings, as Lightning (and trainkit) name them: read-only, since the run
was resolved with them (``trainer/stage_settings.py``'s ``StageSettings``)."""

from __future__ import annotations

from trainkit.trainer.readouts.readout import Readout
from trainkit.trainer.stage_settings import StageSettings


class SettingsReadouts:
    """The checked Trainer arguments a stage reads (read-only)."""

    settings: StageSettings

    selection = Readout(
        lambda t: t.settings.selection,
        "The devices the run uses, as resolved from ``devices``/``gpus``/``accelerator``.",
    )
    dry_run = Readout(
        lambda t: t.settings.dry_run_of is not None,
        "Whether this run is a dry run (one batch of each loop, measured, nothing written).",
    )
    lr_scaling = Readout(lambda t: t.settings.lr_scaling)
    reference_batch_size = Readout(lambda t: t.settings.reference_batch_size)
    batch_size_mode = Readout(lambda t: t.settings.batch_size_mode)
    use_distributed_sampler = Readout(lambda t: t.settings.use_distributed_sampler)
    checkpoint_weights_only = Readout(lambda t: t.settings.checkpoint_weights_only)
    detect_anomaly = Readout(lambda t: t.settings.detect_anomaly)
    max_restarts = Readout(lambda t: t.settings.max_restarts)
