"""Profilers at Lightning's path (``trainkit.profilers``): by name or as objects, each reporting
every hook and step, plus the blocks a program times with ``trainer.profiler.profile``."""

from __future__ import annotations

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit.errors import ConfigError
from trainkit.profilers import (
    AdvancedProfiler,
    PassThroughProfiler,
    Profiler,
    PyTorchProfiler,
    SimpleProfiler,
    build_profiler,
)


class Timed(Regression):
    """Times a block of its own, as a Lightning program does."""

    def training_step(self, batch, batch_idx):
        with self.trainer.profiler.profile("my_block"):
            return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("name", ["simple", "advanced", "pytorch"])
def test_each_profiler_by_name_reports_the_steps_and_the_programs_blocks(
    name, make_trainer, capsys
):
    trainer = make_trainer(max_steps=2, profiler=name)
    trainer.fit(Timed(), regression_loader())
    out = capsys.readouterr().out
    assert "profile (fit)" in out and "my_block" in out
    if name != "pytorch":  # torch's table names operators and the labelled ranges
        assert "training_step" in out


def test_a_profiler_object_writes_its_report_into_the_log_folder(make_trainer, tmp_path):
    profiler = SimpleProfiler(filename="perf")
    make_trainer(max_steps=2, profiler=profiler).fit(Timed(), regression_loader())
    report = (tmp_path / "fit-perf.txt").read_text()
    assert "my_block" in report and "% of stage" in report
    assert profiler.dirpath == str(tmp_path)


def test_the_simple_profiler_times_start_and_stop():
    profiler = SimpleProfiler(extended=False)
    with profiler.profile("load"):
        pass
    profiler.start("save")
    profiler.stop("save")
    assert [len(profiler.durations[name]) for name in ("load", "save")] == [1, 1]
    assert "% of stage" not in profiler.summary()
    with pytest.raises(ValueError, match="without being started"):
        profiler.stop("never")


def test_the_advanced_profiler_shows_the_functions_called(tmp_path):
    profiler = AdvancedProfiler(dirpath=tmp_path, filename="deep", dump_stats=True)
    profiler.setup("fit")
    with profiler.profile("sorting"):
        sorted(range(1000), key=lambda n: -n)
    assert "Profile stats for: sorting" in profiler.summary() and "sorted" in profiler.summary()
    profiler.describe()
    assert "sorted" in (tmp_path / "fit-deep.txt").read_text()
    assert (tmp_path / "fit-sorting.prof").is_file()


def test_the_pytorch_profiler_writes_a_chrome_trace(tmp_path):
    import torch

    profiler = PyTorchProfiler(dirpath=tmp_path, filename="ops", row_limit=5)
    profiler.setup("fit")
    with profiler.profile("matmul"):
        torch.ones(8, 8) @ torch.ones(8, 8)
    profiler.describe()
    assert "aten::mm" in (tmp_path / "fit-ops.txt").read_text()
    assert (tmp_path / "fit-ops.pt.trace.json").is_file()


def test_a_custom_profiler_subclasses_profiler(make_trainer):
    class Counting(Profiler):
        def __init__(self) -> None:
            super().__init__()
            self.calls: dict[str, int] = {}

        def start(self, action_name: str) -> None:
            self.calls[action_name] = self.calls.get(action_name, 0) + 1

        def stop(self, action_name: str) -> None:
            pass

    counting = Counting()
    make_trainer(max_steps=3, profiler=counting).fit(Regression(), regression_loader())
    assert counting.calls["training_step"] == 3


def test_no_profiler_costs_nothing_and_bad_names_are_refused():
    def step() -> int:
        return 1

    assert isinstance(build_profiler(None), PassThroughProfiler)
    assert build_profiler(None).wrap("step", step) is step
    with pytest.raises(ConfigError, match="'fancy'; expected null, 'simple', 'advanced'"):
        build_profiler("fancy")
