"""Lightning's callbacks under their Lightning names: importable from trainkit.callbacks (cheaply),
named by short class name in YAML configs, and listed with their real arguments in
docs/compat.md. Each callback's behaviour is tested in tests/unit/callbacks/."""

from __future__ import annotations

import inspect
import re

import torch
import yaml

from tests.helpers.command_env import REPO

LIGHTNING_CALLBACKS = (
    "ModelCheckpoint",
    "EarlyStopping",
    "OnExceptionCheckpoint",
    "TQDMProgressBar",
    "RichProgressBar",
    "ModelSummary",
    "RichModelSummary",
    "BackboneFinetuning",
    "StochasticWeightAveraging",
    "GradientAccumulationScheduler",
    "Timer",
    "LearningRateMonitor",
)


def test_every_callback_imports_by_its_lightning_name_and_module():
    import trainkit as pl
    import trainkit.callbacks as callbacks
    from trainkit.callbacks.finetuning import BaseFinetuning
    from trainkit.callbacks.progress import RichProgressBar, TQDMProgressBar

    for name in (*LIGHTNING_CALLBACKS, "BaseFinetuning", "Callback", "ProgressBar"):
        assert issubclass(getattr(callbacks, name), callbacks.Callback), name
    assert (
        callbacks.RichProgressBar is RichProgressBar
        and callbacks.TQDMProgressBar is TQDMProgressBar
    )
    assert issubclass(callbacks.BackboneFinetuning, BaseFinetuning)
    assert issubclass(callbacks.RichModelSummary, callbacks.ModelSummary)
    assert issubclass(callbacks.OnExceptionCheckpoint, callbacks.Checkpoint)
    assert pl.callbacks.EarlyStopping is callbacks.EarlyStopping  # `import trainkit as pl`


def documented_arguments(name: str) -> list[str]:
    page = (REPO / "docs" / "compat.md").read_text()
    (row,) = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
    (listed,) = re.findall(r"arguments: ([\w, ]+)", row)
    return [arg.strip() for arg in listed.split(",")]


def test_the_compat_page_lists_each_callbacks_real_arguments():
    import trainkit.callbacks as callbacks

    for name in LIGHTNING_CALLBACKS:
        signature = inspect.signature(getattr(callbacks, name).__init__).parameters
        assert documented_arguments(name) == [p for p in signature if p != "self"], name


CALLBACKS_YAML = """
trainer:
  max_epochs: 3
  callbacks:
    - class_path: RichModelSummary
      init_args: {max_depth: 2}
    - class_path: TQDMProgressBar
      init_args: {refresh_rate: 2}
    - class_path: GradientAccumulationScheduler
      init_args: {scheduling: {1: 2}}
    - class_path: StochasticWeightAveraging
      init_args: {swa_lrs: 0.005, swa_epoch_start: 2}
    - class_path: Timer
      init_args: {duration: "00:01:00:00", interval: epoch}
    - class_path: EarlyStopping
      init_args: {monitor: val_loss, divergence_threshold: 1.0e+6}
    - class_path: ModelCheckpoint
      init_args:
        dirpath: best
        filename: "e{epoch}"
        monitor: val_loss
        save_weights_only: true
        auto_insert_metric_name: false
        save_last: false
        every_n_epochs: 1
    - class_path: OnExceptionCheckpoint
      init_args: {dirpath: crashes}
"""


def test_callbacks_from_yaml_by_short_class_name(run_main, autoencoder_config, tmp_path):
    config = tmp_path / "callbacks.yaml"
    config.write_text(CALLBACKS_YAML)
    result = run_main(
        "fit", "-c", autoencoder_config, "-c", str(config), "--data.init_args.num_samples", "256"
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"encoder\.0\s.*Linear", result.stdout) and "Total params" in result.stdout
    assert "Epoch 2" in result.stdout  # the tqdm bar
    (best,) = (tmp_path / "best").iterdir()
    checkpoint = torch.load(best, weights_only=True)
    assert re.fullmatch(r"e\d\.ckpt", best.name) and "optimizer_states" not in checkpoint
    # 4 batches an epoch: 4 steps, then accumulating 2 from epoch 1 on
    assert checkpoint["global_step"] in (4, 6, 8)
    (run,) = (tmp_path / "runs" / "autoencoder" / "trainkit_logs").iterdir()
    recorded = yaml.safe_load((run / "config.yaml").read_text())["trainer"]["callbacks"]
    assert [c["class_path"].rsplit(".", 1)[-1] for c in recorded] == [
        "RichModelSummary", "TQDMProgressBar", "GradientAccumulationScheduler",
        "StochasticWeightAveraging", "Timer", "EarlyStopping", "ModelCheckpoint",
        "OnExceptionCheckpoint",
    ]  # fmt: skip
    assert not (tmp_path / "crashes").exists()
