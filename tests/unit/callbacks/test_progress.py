"""Progress bars (RichProgressBar, TQDMProgressBar) and model summaries (ModelSummary,
RichModelSummary) in real fits, with Lightning's arguments."""

from __future__ import annotations

import io
import re

import pytest
from torch import nn

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.callbacks import (
    Callback,
    ModelSummary,
    ProgressBar,
    RichModelSummary,
    RichProgressBar,
    RichProgressBarTheme,
    TQDMProgressBar,
)
from trainkit.callbacks.model_summary import human_count

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def fit(*callbacks, model=None, max_epochs=2, **options):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        enable_checkpointing=False,
        logger=False,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
        **options,
    )
    trainer.fit(model or Regression(), regression_loader(), regression_loader(seed=1))
    return trainer


class TrainTasks(Callback):
    """How many bars a RichProgressBar holds when training ends."""

    def __init__(self, bar: RichProgressBar) -> None:
        self.bar, self.count = bar, -1

    def on_train_end(self, trainer, module):
        self.count = len(self.bar._bars.progress.tasks)


@pytest.mark.parametrize(("leave", "bars"), [(True, 2), (False, 1)])
def test_rich_progress_bar_draws_epochs_metrics_and_validation(leave, bars):
    screen = io.StringIO()
    theme = RichProgressBarTheme(metrics_format=".1e")
    bar = RichProgressBar(
        leave=leave,
        theme=theme,
        console_kwargs={"file": screen, "width": 150, "force_terminal": True},
    )
    tasks = TrainTasks(bar)
    trainer = fit(bar, tasks, enable_model_summary=False)
    text = ANSI.sub("", screen.getvalue())
    assert "Epoch 0/1" in text and "Epoch 1/1" in text and "8/8" in text
    assert re.search(r"train_loss: \d\.\de[+-]\d\d", text)  # the theme's metrics format
    assert tasks.count == bars  # leave=True keeps a finished bar per epoch
    assert [cb for cb in trainer.callbacks if isinstance(cb, ProgressBar)] == [bar]


def test_tqdm_progress_bar_draws_on_stdout(capsys):
    bar = TQDMProgressBar(refresh_rate=4, process_position=0, leave=True)
    fit(bar, enable_model_summary=False)
    out = capsys.readouterr().out
    assert "Epoch 0" in out and "Epoch 1" in out and "8/8" in out and "train_loss=" in out
    assert "Validation" in out and bar.process_position == 0 and bar.refresh_rate == 4


def test_tqdm_is_a_dependency_so_lightnings_default_bar_always_works():
    import tomllib

    from tests.helpers.command_env import REPO

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(re.match(r"tqdm\b", spec) for spec in project["dependencies"])


def test_refresh_rate_zero_draws_nothing(capsys):
    bar = TQDMProgressBar(refresh_rate=0)
    fit(bar, enable_model_summary=False)
    assert bar.is_disabled and "Epoch" not in capsys.readouterr().out


class Transfer(Regression):
    """Regression plus a frozen backbone and a head (54 parameters, 40 frozen)."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.backbone.requires_grad_(False)


def test_model_summary_prints_the_layer_table_and_totals_at_fit_start(capsys):
    fit(ModelSummary(max_depth=1), model=Transfer(), max_epochs=1, enable_progress_bar=False)
    out = capsys.readouterr().out
    table = [line.rstrip() for line in out[out.index("  | Name") :].splitlines()[:12]]
    rule = "-" * len(table[0])
    assert table == [
        "  | Name     | Type       | Params | Mode",
        rule,
        "0 | layer    | Linear     | 5      | train",
        "1 | backbone | Sequential | 40     | train",
        "2 | head     | Linear     | 9      | train",
        rule,
        "14        Trainable params",
        "40        Non-trainable params",
        "54        Total params",
        "0.000     Total estimated model params size (MB)",
        "6         Modules in train mode",
        "0         Modules in eval mode",
    ]


def test_model_summary_depth(capsys):
    fit(ModelSummary(max_depth=-1), model=Transfer(), max_epochs=1, enable_progress_bar=False)
    out = capsys.readouterr().out
    assert "2 | backbone.0 | Linear" in out and "3 | backbone.1 | ReLU" in out
    fit(ModelSummary(max_depth=0), model=Transfer(), max_epochs=1, enable_progress_bar=False)
    assert "Trainable params" not in capsys.readouterr().out


def test_rich_model_summary_draws_a_table(capsys):
    fit(RichModelSummary(max_depth=2), model=Transfer(), max_epochs=1, enable_progress_bar=False)
    out = ANSI.sub("", capsys.readouterr().out)
    assert "backbone.0" in out and "Sequential" in out and "Total params" in out
    assert re.search(r"40\s+Non-trainable params", out)


def test_human_counts():
    assert [human_count(n) for n in (999, 1234, 2_500_000, 3e9)] == [
        "999", "1.2 K", "2.5 M", "3.0 B",
    ]  # fmt: skip
