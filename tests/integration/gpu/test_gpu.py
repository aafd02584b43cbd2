"""GPU checks (``scripts/gpu_check.sh`` runs them on the GPU machine, with torch 2.11 there):
each precision with fp16's GradScaler at work, an exact mid-epoch resume under deterministic
algorithms, every ``devices`` form on the real device, ddp / fsdp / deepspeed / dp on one GPU,
torch.compile on CUDA, checkpoints across CPU and GPU, the README tour on the GPU, and the dry
run's memory against the real run's. Without CUDA every test is skipped, saying why."""

from __future__ import annotations

import gc
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.command_env import REPO
from tests.helpers.models import Regression, regression_loader
from trainkit import Callback, Trainer, TrainModule, seed_everything
from trainkit.errors import ConfigError


def why_no_cuda() -> str | None:
    """Why this machine cannot run the GPU checks (None: it can)."""
    if torch.version.cuda is None:
        return f"needs a CUDA device: this torch ({torch.__version__}) is a CPU-only build"
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return (
            f"needs a CUDA device: torch {torch.__version__} (CUDA {torch.version.cuda}) sees "
            f"none (CUDA_VISIBLE_DEVICES={visible!r}; no driver or no GPU)"
        )
    return None


NO_CUDA = why_no_cuda()
GPUS = torch.cuda.device_count() if NO_CUDA is None else 0
PRECISIONS = ["32", "16-mixed", "bf16-mixed"]
DTYPES = {"32": torch.float32, "16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(NO_CUDA is not None, reason=NO_CUDA or "")]
TWO_GPUS = pytest.mark.skipif(GPUS < 2, reason=NO_CUDA or f"needs 2 GPUs ({GPUS} here)")


def gpu_trainer(root: Path, **kwargs: Any) -> Trainer:
    options: dict[str, Any] = dict(
        accelerator="gpu",
        devices=1,
        default_root_dir=str(root),
        enable_progress_bar=False,
        logger=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
    )
    options.update(kwargs)
    return Trainer(**options)


class Probe(Regression):
    """Regression that records the device and autocast dtype its training steps saw."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__(lr=lr)
        self.seen: dict[str, Any] = {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen["device"] = batch[0].device
        self.seen["input_dtype"] = batch[0].dtype
        self.seen["dtype"] = self(batch[0]).dtype
        if dist.is_initialized():
            self.seen["backend"] = dist.get_backend()
            self.seen["world"] = dist.get_world_size()
        return super().training_step(batch, batch_idx)


# ---- the README tour (first: the longest check, 11 commands; the other workers share the rest)
def on_the_gpu(command: str) -> str:
    """A tour command with the GPU as its accelerator (one GPU: its 2-rank job is ddp on 1)."""
    words = shlex.split(command)
    if words[1] not in ("fit", "validate", "test", "predict") or "-c" not in words:
        return command
    if GPUS < 2 and "--trainer.devices" in words:
        at = words.index("--trainer.devices")
        words[at : at + 2] = ["--trainer.devices", "1", "--trainer.strategy", "ddp"]
    at = words.index("-c") + 2
    words[at:at] = ["--trainer.accelerator", "gpu"]
    return shlex.join(words)


@pytest.mark.timeout(180)
def test_the_readme_tour_runs_on_the_gpu(tmp_path, no_leftovers):
    from tests.integration.first_hour.test_readme_tour import run, tour_commands, tour_files

    for name, text in tour_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    outputs = {}
    for command in map(on_the_gpu, tour_commands()):
        result = run(command, tmp_path)
        assert result.returncode == 0, f"{command}\n{result.stderr[-4000:]}"
        outputs[command] = result.stdout
    fits = [
        out for command, out in outputs.items() if " fit " in command and "--help" not in command
    ]
    assert all(
        re.search(r"accelerator +gpu", out) for out in fits if "training configuration" in out
    )
    dry = next(out for command, out in outputs.items() if "--dry_run" in command)
    assert "MiB CUDA allocated" in dry, dry
    assert sorted((tmp_path / "trainkit_logs").glob("version_*/predictions.pt"))


# ---- precisions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", PRECISIONS)
def test_trains_on_one_gpu_with_each_precision(make_trainer, precision):
    model = Probe()
    trainer = make_trainer(accelerator="gpu", devices=1, max_epochs=5, precision=precision)
    trainer.fit(model, regression_loader())
    assert model.seen["device"] == torch.device("cuda", 0)
    assert model.seen["dtype"] == DTYPES[precision]
    assert trainer.callback_metrics["train_loss"].item() < 1.0
    if precision == "16-mixed":
        assert trainer.precision_plugin.scaler.get_scale() > 0


class ScaleWatch(Callback):
    """Starts the fp16 loss scale at 1 (no overflow of real gradients) growing every 2 good
    steps, puts an inf into one gradient at ``inf_batch``, and records per batch: the scale
    after the step, and whether the weights moved."""

    initial = 1.0

    def __init__(self, inf_batch: int) -> None:
        self.inf_batch = inf_batch
        self.rows: list[tuple[int, float, bool]] = []
        self.before = torch.empty(0)

    def on_fit_start(self, trainer, pl_module):
        state = {"scale": self.initial, "growth_factor": 2.0, "backoff_factor": 0.5}
        trainer.scaler.load_state_dict({**state, "growth_interval": 2, "_growth_tracker": 0})

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.before = pl_module.layer.weight.detach().clone()

    def on_after_backward(self, trainer, pl_module):
        if len(self.rows) == self.inf_batch:
            pl_module.layer.weight.grad[0, 0] = float("inf")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        moved = not torch.equal(self.before, pl_module.layer.weight)
        self.rows.append((batch_idx, trainer.scaler.get_scale(), moved))


def test_fp16_scaler_skips_the_inf_step_and_moves_its_scale(tmp_path):
    watch = ScaleWatch(inf_batch=5)
    trainer = gpu_trainer(tmp_path, precision="16-mixed", max_epochs=1, callbacks=[watch])
    trainer.fit(Regression(), regression_loader())  # 8 batches
    scales = [scale for _, scale, _ in watch.rows]
    moved = [m for _, _, m in watch.rows]
    assert moved == [True] * 5 + [False] + [True] * 2, watch.rows  # the inf step was skipped
    assert scales[1] == 2 * watch.initial  # grew after 2 good steps
    assert scales[5] == scales[4] / 2  # halved by the inf
    assert trainer.callback_metrics["train_loss"].isfinite()


def test_scaler_state_round_trips_through_checkpoints(tmp_path):
    trainer = gpu_trainer(tmp_path, precision="16-mixed", max_epochs=1, enable_checkpointing=True)
    trainer.fit(Regression(), regression_loader())
    checkpoint = torch.load(trainer.checkpoint_callback.last_model_path, weights_only=True)
    assert checkpoint["precision_scaler"]["scale"] == trainer.scaler.get_scale()


# ---- exact resume -------------------------------------------------------------------------------
class NoisyMLP(TrainModule):
    """Dropout (the CUDA RNG), Adam and a per-step scheduler: an exact resume needs them all."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def noisy_loader() -> DataLoader:
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8, shuffle=True)


def fit_noisy(root: Path, max_steps: int, precision: str, ckpt_path: str | None = None):
    seed_everything(3)
    model = NoisyMLP()
    trainer = gpu_trainer(
        root,
        precision=precision,
        deterministic=True,
        max_steps=max_steps,
        enable_checkpointing=True,
    )
    trainer.fit(model, noisy_loader(), ckpt_path=ckpt_path)
    return trainer, model


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_mid_epoch_resume_on_the_gpu_is_exact(tmp_path, precision):
    try:
        straight_trainer, straight = fit_noisy(tmp_path / "a", 13, precision)
        fit_noisy(tmp_path / "b", 5, precision)  # stops after 5 of the epoch's 8 batches
        resumed_trainer, resumed = fit_noisy(tmp_path / "b", 13, precision, ckpt_path="last")
    finally:
        torch.use_deterministic_algorithms(False)
    assert resumed_trainer.global_step == 13
    assert resumed.device.type == "cuda"
    for key, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0)
    for (_, a), (_, b) in zip(
        straight_trainer.optimizers[0].state_dict()["state"].items(),
        resumed_trainer.optimizers[0].state_dict()["state"].items(),
    ):
        torch.testing.assert_close(a["exp_avg_sq"], b["exp_avg_sq"], rtol=0, atol=0)
    if precision == "16-mixed":
        assert straight_trainer.scaler.state_dict() == resumed_trainer.scaler.state_dict()


# ---- devices ------------------------------------------------------------------------------------
@pytest.mark.parametrize("devices", [1, "0", [0], "0,", -1, "auto"], ids=repr)
def test_each_devices_form_trains_on_the_first_gpu(tmp_path, devices):
    if devices in (-1, "auto") and GPUS > 1:
        pytest.skip(f"{devices!r} means all {GPUS} GPUs here (ddp ranks), not one")
    model = Probe()
    trainer = gpu_trainer(tmp_path, devices=devices, max_epochs=1)
    trainer.fit(model, regression_loader())
    assert model.seen["device"] == torch.device("cuda", 0)
    assert trainer.num_devices == 1 and trainer.strategy.name == "single"


def test_accelerator_auto_picks_the_gpu(tmp_path):
    if GPUS > 1:
        pytest.skip(f"'auto' devices means all {GPUS} GPUs here (ddp ranks)")
    model = Probe()
    gpu_trainer(tmp_path, accelerator="auto", devices="auto", max_epochs=1).fit(
        model, regression_loader()
    )
    assert model.seen["device"].type == "cuda"


def test_ids_beyond_the_visible_gpus_are_refused():
    for spec in ([GPUS], str(GPUS), f"{GPUS},", GPUS + 1, f"0-{GPUS}"):
        with pytest.raises(ConfigError, match=rf"ids \[{GPUS}\] do not exist"):
            Trainer(accelerator="gpu", devices=spec)


def test_the_cli_refuses_a_gpu_id_beyond_the_visible_ones_in_one_line(run_main, autoencoder_config):
    result = run_main(
        "fit",
        "-c",
        autoencoder_config,
        "--trainer.accelerator",
        "gpu",
        "--trainer.devices",
        f"{GPUS},",
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("trainkit: error: ") and f"ids [{GPUS}] do not exist" in line


# ---- strategies on one GPU ----------------------------------------------------------------------
@pytest.fixture
def own_rendezvous(monkeypatch):
    """A strategy that joins a process group sets MASTER_ADDR/PORT and keeps the group after
    fit (as Lightning, for a later test or predict): both undone after the test."""
    for key in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def test_ddp_on_one_gpu_joins_a_nccl_group_of_one(tmp_path, own_rendezvous):
    model = Probe()
    trainer = gpu_trainer(tmp_path, strategy="ddp", max_epochs=3)
    trainer.fit(model, regression_loader())
    assert model.seen["backend"] == "nccl" and model.seen["world"] == 1
    assert model.seen["device"] == torch.device("cuda", 0)
    assert trainer.callback_metrics["train_loss"].item() < 5.0


def test_the_cli_runs_ddp_on_one_gpu_over_nccl(run_cli, autoencoder_config, tmp_path):
    result = run_cli(
        "fit",
        "-c",
        autoencoder_config,
        *("--trainer.accelerator", "gpu", "--trainer.devices", "1", "--trainer.strategy", "ddp"),
        *("--trainer.max_epochs", "1", "--trainer.default_root_dir", str(tmp_path)),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"backend +nccl", result.stdout), result.stdout


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_fsdp_on_one_gpu_shards_into_dtensors_and_saves_a_full_checkpoint(
    tmp_path, own_rendezvous, precision
):
    from torch.distributed.tensor import DTensor

    kinds = set()

    class Sharded(Probe):
        def on_train_batch_start(self, batch, batch_idx):
            kinds.update(type(p) for p in self.parameters())

    trainer = gpu_trainer(
        tmp_path, strategy="fsdp", precision=precision, max_epochs=3, enable_checkpointing=True
    )
    model = Sharded()
    trainer.fit(model, regression_loader())
    assert kinds and all(issubclass(kind, DTensor) for kind in kinds), kinds
    assert model.seen["backend"] == "nccl" and model.seen["device"].type == "cuda"
    restored = Regression.load_from_checkpoint(trainer.checkpoint_callback.last_model_path)
    assert restored.layer.weight.shape == (1, 4) and restored.layer.weight.device.type == "cpu"


def test_deepspeed_stage_2_on_one_gpu(run_cli, tmp_path):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (scripts/gpu_wheels.sh)")
    config = str(REPO / "configs" / "deepspeed.yaml")
    common = ("--trainer.accelerator", "gpu", "--trainer.devices", "1")
    fit = run_cli(
        "fit",
        "-c",
        config,
        *common,
        *("--trainer.precision", "bf16-mixed", "--trainer.max_epochs", "1"),
        *("--trainer.default_root_dir", str(tmp_path)),
        timeout=840,
    )
    assert fit.returncode == 0, fit.stderr[-4000:]
    assert "ZeRO stage 2" in fit.stdout and re.search(r"backend +nccl", fit.stdout), fit.stdout
    test = run_cli(
        "test",
        "-c",
        config,
        *common,
        *("--trainer.default_root_dir", str(tmp_path), "--ckpt_path", "last"),
        timeout=600,
    )
    assert test.returncode == 0, test.stderr[-4000:]


@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed"])
def test_deepspeed_mixed_precision_is_the_engines(tmp_path, precision):
    """deepspeed turns torch's autocast off in its forward: its fp16/bf16 section holds the
    weights in that type, the step gets its batch in that type (as Lightning's), fp16's loss
    scale is the engine's (no GradScaler beside it), and the loss goes down."""
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (scripts/gpu_wheels.sh)")
    model = Probe()
    trainer = gpu_trainer(tmp_path, strategy="deepspeed_stage_2", precision=precision, max_epochs=5)
    trainer.fit(model, regression_loader())
    dtype = DTYPES[precision]
    assert model.seen["input_dtype"] == dtype and model.seen["dtype"] == dtype
    assert model.layer.weight.dtype == dtype
    assert trainer.run_state.precision.scaler is None
    assert trainer.callback_metrics["train_loss"].item() < 1.0


@pytest.mark.parametrize("precision", PRECISIONS)
def test_dp_on_one_gpu(tmp_path, precision):
    model = Probe()
    trainer = gpu_trainer(tmp_path, strategy="dp", precision=precision, max_epochs=5)
    trainer.fit(model, regression_loader())
    assert model.seen["device"] == torch.device("cuda", 0)
    assert model.seen["dtype"] == DTYPES[precision]
    assert trainer.callback_metrics["train_loss"].item() < 1.0


# ---- torch.compile ------------------------------------------------------------------------------
class Mlp(Regression):
    def __init__(self) -> None:
        super().__init__(lr=0.05)
        self.layer = nn.Sequential(nn.Linear(4, 32), nn.GELU(), nn.Linear(32, 1))


def test_compile_on_cuda_trains_as_eager_does(tmp_path):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch.manual_seed(0)
    eager = Mlp()
    gpu_trainer(tmp_path, max_epochs=2).fit(eager, regression_loader())
    torch.manual_seed(0)
    compiled = Mlp()
    counter = CompileCounterWithBackend("inductor")
    gpu_trainer(tmp_path, max_epochs=2, compile={"backend": counter}).fit(
        compiled, regression_loader()
    )
    assert counter.frame_count >= 1
    for key, value in eager.state_dict().items():
        torch.testing.assert_close(compiled.state_dict()[key], value, rtol=1e-4, atol=1e-5)
    assert "forward" not in vars(compiled)  # given back uncompiled


def test_compile_reduce_overhead_uses_cuda_graphs_and_trains(tmp_path):
    model = Mlp()
    trainer = gpu_trainer(tmp_path, max_epochs=4, compile="reduce-overhead")
    trainer.fit(model, regression_loader())
    assert trainer.callback_metrics["train_loss"].item() < 5.0


# ---- checkpoints across devices -----------------------------------------------------------------
def test_a_gpu_checkpoint_tests_on_cpu_and_a_cpu_checkpoint_on_gpu(tmp_path):
    options: dict[str, Any] = dict(enable_progress_bar=False, logger=False)
    data, held_out = regression_loader(), regression_loader(seed=2)

    def test_loss(accelerator: str, ckpt: str, root: Path) -> float:
        trainer = Trainer(accelerator=accelerator, default_root_dir=str(root), **options)
        (result,) = trainer.test(Regression(), held_out, ckpt_path=ckpt, verbose=False)
        return result["test_loss"]

    on_gpu = Trainer(
        accelerator="gpu",
        precision="16-mixed",
        max_epochs=2,
        default_root_dir=str(tmp_path / "g"),
        **options,
    )
    on_gpu.fit(Regression(), data)
    gpu_ckpt = on_gpu.checkpoint_callback.last_model_path
    assert test_loss("cpu", gpu_ckpt, tmp_path / "g") == pytest.approx(
        test_loss("gpu", gpu_ckpt, tmp_path / "g"), rel=1e-5
    )
    on_cpu = Trainer(
        accelerator="cpu", max_epochs=2, default_root_dir=str(tmp_path / "c"), **options
    )
    on_cpu.fit(Regression(), data)
    cpu_ckpt = on_cpu.checkpoint_callback.last_model_path
    assert test_loss("gpu", cpu_ckpt, tmp_path / "c") == pytest.approx(
        test_loss("cpu", cpu_ckpt, tmp_path / "c"), rel=1e-5
    )
    resumed = Trainer(
        accelerator="gpu", max_epochs=3, default_root_dir=str(tmp_path / "c"), **options
    )
    resumed.fit(Regression(), data, ckpt_path=cpu_ckpt)  # a CPU run goes on on the GPU
    assert resumed.current_epoch == 3 and resumed.lightning_module.device.type == "cuda"


# ---- the dry run's memory -----------------------------------------------------------------------
class Wide(TrainModule):
    """~100M parameters with Adam: a peak of about 1.6 GB, far above the allocator's rounding."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(1024, 8192), nn.ReLU(), nn.Linear(8192, 8192), nn.ReLU(), nn.Linear(8192, 1)
        )

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self.net(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-4)


def wide_loader() -> DataLoader:
    x = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.mean(1, keepdim=True)), batch_size=256)


def settled() -> int:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_the_dry_runs_peak_memory_is_the_real_first_steps_within_20_percent(
    tmp_path, capsys, precision
):
    before = settled()
    gpu_trainer(
        tmp_path, precision=precision, dry_run=True, max_epochs=2, enable_progress_bar=True
    ).fit(Wide(), wide_loader(), wide_loader())
    out = capsys.readouterr().out
    (reported,) = re.findall(r"\n +0 +([\d,]+) MiB CUDA allocated", out)
    dry_mib = int(reported.replace(",", "")) - before / 2**20
    before = settled()
    gpu_trainer(
        tmp_path, precision=precision, max_epochs=1, limit_train_batches=3, limit_val_batches=1
    ).fit(Wide(), wide_loader(), wide_loader())
    real_mib = (torch.cuda.max_memory_allocated() - before) / 2**20
    assert abs(dry_mib - real_mib) <= 0.2 * real_mib, (dry_mib, real_mib)


# ---- several GPUs (skipped on one) --------------------------------------------------------------
@TWO_GPUS
def test_ddp_over_nccl_on_two_gpus(run_cli, tmp_path):
    result = run_cli(
        "fit",
        "-c",
        str(REPO / "configs" / "autoencoder.yaml"),
        "--trainer.accelerator",
        "gpu",
        "--trainer.devices",
        "0,1",
        "--trainer.max_epochs",
        "1",
        "--trainer.default_root_dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "nccl" in result.stdout


@TWO_GPUS
@pytest.mark.parametrize("precision", PRECISIONS)
def test_dp_splits_the_batch_over_two_gpus(make_trainer, precision):
    devices_seen = set()

    class SeesDevices(Regression):
        def training_step(self, batch, batch_idx):
            devices_seen.add(batch[0].device)
            return super().training_step(batch, batch_idx)

    trainer = make_trainer(
        accelerator="gpu", devices=2, strategy="dp", max_epochs=2, precision=precision
    )
    trainer.fit(SeesDevices(), regression_loader())
    assert devices_seen == {torch.device("cuda", 0), torch.device("cuda", 1)}


@TWO_GPUS
def test_sharded_fp16_uses_the_sharded_grad_scaler(run_cli, tmp_path):
    grad_scaler = pytest.importorskip("fairscale.optim.grad_scaler", reason="needs fairscale")

    trainer = Trainer(accelerator="gpu", devices=2, strategy="ddp_sharded", precision="16-mixed")
    assert isinstance(trainer.precision_plugin.scaler, grad_scaler.ShardedGradScaler)
    result = run_cli(
        "fit",
        "-c",
        str(REPO / "configs" / "sharded.yaml"),
        "--trainer.accelerator",
        "gpu",
        "--trainer.precision",
        "16-mixed",
        "--trainer.default_root_dir",
        str(tmp_path),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
