"""Checkpoints that don't stall training: with AsyncCheckpointIO a save waits only for a copy in
host memory, the file is written in the background, and everything a checkpoint promised still
holds: the state at save time, bitwise-exact resume, whole files only, loud failures."""

from __future__ import annotations

import os
import pickle
import signal
import threading
from pathlib import Path

import pytest
import torch

from tests.helpers.resumable import NoisyData, NoisyRegressor
from trainkit import Callback, Trainer, seed_everything
from trainkit.callbacks import ModelCheckpoint
from trainkit.plugins import AsyncCheckpointIO, CheckpointWriteError, TorchCheckpointIO

DEADLINE = 60  # seconds a test waits for a signal that should come at once


class GatedIO(TorchCheckpointIO):
    """Writes only once ``opened`` is set; records what it wrote and how many writes overlapped."""

    def __init__(self, open_at_start: bool = False) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.events: list[str] = []
        self.active = self.most_active = 0
        self._lock = threading.Lock()
        if open_at_start:
            self.opened.set()

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            self.events.append(f"start {Path(path).name}")
        self.entered.set()
        try:
            assert self.opened.wait(DEADLINE), "nobody opened the gate"
            super().save_checkpoint(checkpoint, path, storage_options)
        finally:
            with self._lock:
                self.active -= 1
                self.events.append(f"end {Path(path).name}")


class FailingIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        raise OSError(28, "No space left on device")


def fit(root, plugins=None, callbacks=(), ckpt_path=None, max_steps=-1, checkpointing=True):
    seed_everything(7)
    model = NoisyRegressor()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=2,
        max_steps=max_steps,
        default_root_dir=str(root),
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=checkpointing,
        callbacks=list(callbacks),
        plugins=plugins,
    )
    trainer.fit(model, datamodule=NoisyData(), ckpt_path=ckpt_path)
    return trainer, model


def every_4_steps(root) -> ModelCheckpoint:
    return ModelCheckpoint(dirpath=str(root), every_n_train_steps=4, save_top_k=-1)


def test_async_checkpoints_equal_sync_ones_and_resume_bitwise_exact(tmp_path):
    _, straight = fit(tmp_path / "sync", callbacks=[every_4_steps(tmp_path / "sync-ckpt")])
    fit(tmp_path / "async", [AsyncCheckpointIO()], [every_4_steps(tmp_path / "async-ckpt")])
    names = sorted(p.name for p in (tmp_path / "sync-ckpt").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "async-ckpt").iterdir())
    assert len(names) == 7  # 6 step checkpoints and last.ckpt
    for name in names:  # the same content, the folder name aside
        sync = torch.load(tmp_path / "sync-ckpt" / name, weights_only=True)
        written = torch.load(tmp_path / "async-ckpt" / name, weights_only=True)
        assert_same(written, sync, name, ("async-ckpt", "sync-ckpt"))

    mid = str(tmp_path / "async-ckpt" / "epoch=1-step=16.ckpt")  # written in the background
    _, resumed = fit(tmp_path / "resumed", [AsyncCheckpointIO()], ckpt_path=mid)
    for key, value in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key


def assert_same(found, expected, where: str, renamed: tuple[str, str]) -> None:
    """Equal structure, bitwise-equal tensors, equal values (strings after renaming a folder)."""
    assert type(found) is type(expected), where
    if isinstance(found, torch.Tensor):
        assert found.dtype == expected.dtype and torch.equal(found, expected), where
    elif isinstance(found, dict):
        assert found.keys() == expected.keys(), where
        for key in found:
            assert_same(found[key], expected[key], f"{where}/{key}", renamed)
    elif isinstance(found, list | tuple):
        assert len(found) == len(expected), where
        for index, (a, b) in enumerate(zip(found, expected)):
            assert_same(a, b, f"{where}[{index}]", renamed)
    elif isinstance(found, str):
        assert found.replace(*renamed) == expected, where
    elif found == found:  # not NaN
        assert found == expected, where


class SaveAtStep2(Callback):
    """Saves once at step 2, remembers the state then, and opens the gate at step 6."""

    def __init__(self, gate: GatedIO, path: Path) -> None:
        self.gate, self.path = gate, path
        self.at_save: dict[str, torch.Tensor] = {}
        self.adam_at_save: dict[int, dict[str, torch.Tensor]] = {}
        self.seen_at_step_6: tuple[bool, bool] | None = None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == 2:
            trainer.save_checkpoint(str(self.path))
            self.at_save = {k: v.clone() for k, v in module.state_dict().items()}
            adam = trainer.optimizers[0].state_dict()["state"]
            self.adam_at_save = {i: {k: v.clone() for k, v in s.items()} for i, s in adam.items()}
        elif trainer.global_step == 6:
            changed = any(
                not torch.equal(v, self.at_save[k]) for k, v in module.state_dict().items()
            )
            self.seen_at_step_6 = (self.path.exists(), changed)
            self.gate.opened.set()


def test_the_file_holds_the_state_at_save_time_while_training_steps_on(tmp_path):
    gate = GatedIO()
    saver = SaveAtStep2(gate, tmp_path / "step2.ckpt")
    _, model = fit(tmp_path, [AsyncCheckpointIO(gate)], [saver], max_steps=8, checkpointing=False)

    assert saver.seen_at_step_6 == (False, True)  # 4 steps later: still writing, weights moved on
    saved = torch.load(saver.path, weights_only=True)
    assert saved["global_step"] == 2
    for key, value in saver.at_save.items():
        assert torch.equal(saved["state_dict"][key], value), key
        if key.startswith("net."):  # trained weights (not the empty ballast buffer) moved on
            assert not torch.equal(model.state_dict()[key], value), key
    for index, state in saver.adam_at_save.items():
        for name, value in state.items():
            assert torch.equal(saved["optimizer_states"][0]["state"][index][name], value), name


def test_the_next_save_waits_for_the_write_in_flight(tmp_path):
    gate = GatedIO()
    io = AsyncCheckpointIO(gate)
    first, second = tmp_path / "first.ckpt", tmp_path / "second.ckpt"
    io.save_checkpoint({"w": torch.zeros(3)}, first)  # returns while its write is held
    assert not first.exists()
    opener = threading.Thread(target=lambda: gate.entered.wait(DEADLINE) and gate.opened.set())
    opener.start()
    io.save_checkpoint({"w": torch.ones(3)}, second)
    gate.events.append("second save returned")
    assert torch.equal(torch.load(first, weights_only=True)["w"], torch.zeros(3))
    io.teardown()
    opener.join(DEADLINE)
    events = gate.events
    assert events[:2] == ["start first.ckpt", "end first.ckpt"]  # before the second save returned
    assert sorted(events[2:]) == ["end second.ckpt", "second save returned", "start second.ckpt"]
    assert torch.equal(torch.load(second, weights_only=True)["w"], torch.ones(3))


def test_a_fit_that_saves_every_step_never_has_two_writes_in_flight(tmp_path):
    gate = GatedIO(open_at_start=True)
    every_step = ModelCheckpoint(dirpath=str(tmp_path), every_n_train_steps=1, save_top_k=-1)
    fit(tmp_path, [AsyncCheckpointIO(gate)], [every_step], max_steps=6)
    assert gate.most_active == 1
    starts, ends = gate.events[0::2], gate.events[1::2]  # each write ends before the next starts
    assert [e.replace("start", "end") for e in starts] == ends
    assert len(starts) >= 12  # a step checkpoint and last.ckpt after each of 6 steps
    assert sorted(p.name for p in tmp_path.glob("*.ckpt"))[-1] == "last.ckpt"


class WaitedForAtTeardown(AsyncCheckpointIO):
    """Opens the gate only when the Trainer tears the plugin down: a fit that did not wait for
    the write in flight would return with the last checkpoint missing."""

    def __init__(self, gate: GatedIO) -> None:
        super().__init__(gate)
        self.gate = gate

    def teardown(self) -> None:
        self.gate.opened.set()
        super().teardown()


class SaveAt(Callback):
    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(str(self.path))


def test_fit_returns_once_the_last_write_is_on_disk(tmp_path):
    gate = GatedIO()
    save = SaveAt(5, tmp_path / "last.ckpt")
    fit(tmp_path, [WaitedForAtTeardown(gate)], [save], max_steps=5, checkpointing=False)
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 5
    assert gate.events == ["start last.ckpt", "end last.ckpt"]


class SignalAt(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGUSR1)  # as SLURM warns before preempting a job


def test_a_preempted_fit_returns_once_its_checkpoint_is_on_disk(tmp_path):
    gate = GatedIO()
    trainer, _ = fit(tmp_path, [WaitedForAtTeardown(gate)], [SignalAt(3)], checkpointing=False)
    assert trainer.preempted == "SIGUSR1"
    (saved,) = tmp_path.glob("**/last.ckpt")
    assert torch.load(saved, weights_only=True)["global_step"] == 3
    assert gate.events == ["start last.ckpt", "end last.ckpt"]


@pytest.mark.parametrize(("max_steps", "raised_at"), [(9, 4), (2, 2)], ids=["next-save", "fit-end"])
def test_a_failed_background_write_fails_the_run_naming_the_file(tmp_path, max_steps, raised_at):
    every_2 = ModelCheckpoint(dirpath=str(tmp_path), every_n_train_steps=2, save_top_k=0)
    trainer_box = []

    class Remember(Callback):
        def setup(self, trainer, module, stage):
            trainer_box.append(trainer)

    with pytest.raises(CheckpointWriteError) as raised:
        fit(tmp_path, [AsyncCheckpointIO(FailingIO())], [every_2, Remember()], max_steps=max_steps)
    message = str(raised.value)
    assert repr(str(tmp_path / "last.ckpt")) in message
    assert "No space left on device" in message
    assert trainer_box[0].global_step == raised_at  # the next save, or the end of fit
    assert not (tmp_path / "last.ckpt").exists()


class PausesWhilePickled:
    """Holds torch.save in the middle of writing until ``release`` is set."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered, self.release = entered, release

    def __reduce__(self):
        self.entered.set()
        assert self.release.wait(DEADLINE)
        return (int, (7,))


def test_a_checkpoint_appears_whole_or_not_at_all(tmp_path):
    path = tmp_path / "last.ckpt"
    TorchCheckpointIO().save_checkpoint({"w": torch.zeros(1000)}, path)
    entered, release = threading.Event(), threading.Event()
    io = AsyncCheckpointIO()
    io.save_checkpoint({"w": torch.ones(1000), "pause": PausesWhilePickled(entered, release)}, path)
    assert entered.wait(DEADLINE)
    # mid-write: the name still holds the previous, complete checkpoint; the new one is a temp file
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.zeros(1000))
    assert [p.name for p in tmp_path.glob(".last.ckpt.*.tmp")] != []
    release.set()
    io.teardown()
    written = torch.load(path, weights_only=False)
    assert torch.equal(written["w"], torch.ones(1000)) and written["pause"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_the_plugin_pickles_for_spawned_ranks_and_loads_after_the_write(tmp_path):
    io = pickle.loads(pickle.dumps(AsyncCheckpointIO()))
    state = {"layer.weight": torch.randn(4, 4), "meta": {"step": 3, "names": ["a", "b"]}}
    at_save = state["layer.weight"].clone()
    io.save_checkpoint(state, tmp_path / "x.ckpt")
    state["layer.weight"].add_(1)  # after the save returned: not in the file
    state["meta"]["names"].append("c")
    loaded = io.load_checkpoint(tmp_path / "x.ckpt")  # waits for the write in flight
    assert torch.equal(loaded["layer.weight"], at_save)
    assert loaded["meta"] == {"step": 3, "names": ["a", "b"]}
    io.teardown()


def test_the_config_switch_and_bad_plugins(tmp_path):
    from trainkit.cli.command import build_parser, instantiate
    from trainkit.errors import ConfigError

    parser = build_parser("trainkit", None, None, "fit")
    config = parser.parse_args(
        [
            "--model=tests.helpers.resumable.NoisyRegressor",
            "--trainer.plugins=AsyncCheckpointIO",  # in YAML: trainer: {plugins: AsyncCheckpointIO}
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    _, _, trainer = instantiate(parser, config)
    assert type(trainer.run_state.checkpoint_io) is AsyncCheckpointIO
    assert "trainkit.checkpoint.async_io.AsyncCheckpointIO" in trainer.cli_config
    assert type(Trainer(default_root_dir=str(tmp_path)).run_state.checkpoint_io) is (
        TorchCheckpointIO
    )
    with pytest.raises(
        ConfigError, match=r"trainer.plugins 'fast_please'; expected .*CheckpointIO"
    ):
        Trainer(plugins="fast_please", default_root_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="keep one CheckpointIO"):
        Trainer(plugins=[AsyncCheckpointIO(), TorchCheckpointIO()], default_root_dir=str(tmp_path))


class HeldIO(TorchCheckpointIO):
    """Each write is held until someone waits for it or removes a file (whichever comes first),
    so the order of 'end' and 'remove' shows which of the two the caller did."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.events: list[str] = []

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        assert self.go.wait(DEADLINE), "nobody waited for the save nor removed a file"
        self.go.clear()
        super().save_checkpoint(checkpoint, path, storage_options)
        self.events.append(f"end {Path(path).name}")


class WaitedAsyncIO(AsyncCheckpointIO):
    def wait(self) -> None:
        self.checkpoint_io.go.set()  # whoever waits releases the held write
        super().wait()


def test_a_replaced_top_k_file_is_removed_only_once_its_successor_is_on_disk(tmp_path, monkeypatch):
    """Before, ModelCheckpoint unlinked the replaced best file while the new one was still
    being written in the background: a kill then left no best checkpoint at all."""
    io = HeldIO()
    unlink = Path.unlink

    def recorded_unlink(self, missing_ok=False):
        if self.suffix == ".ckpt" and self.name.startswith("step="):
            io.events.append(f"remove {self.name}")
            io.go.set()
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", recorded_unlink)
    best = ModelCheckpoint(
        dirpath=str(tmp_path / "ckpt"),
        filename="{step}",
        monitor="step",
        mode="max",
        every_n_train_steps=4,
        save_top_k=1,
    )
    fit(tmp_path, [WaitedAsyncIO(io)], [best], checkpointing=False)
    events = io.events
    removals = [index for index, event in enumerate(events) if event.startswith("remove ")]
    assert removals, events  # top-k files were replaced
    for index in removals:  # each removal came after its successor's write had ended
        removed = int(events[index].removeprefix("remove step=").removesuffix(".ckpt"))
        later = [e for e in events[:index] if e.startswith("end step=")]
        assert any(int(e.split("=")[1].removesuffix(".ckpt")) > removed for e in later), events
