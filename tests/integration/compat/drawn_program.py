"""One drawn program (a ``Spec`` of tests/integration/compat/differential.py) built and run under
``trainkit`` or ``lightning.pytorch``: the module (automatic or manual optimization, one or two
optimizers, ``configure_optimizers`` in each return form, one or two validation loaders, epoch-end
hooks that log), its callbacks and loggers, a plain ``Trainer`` or a LightningCLI run from a
generated YAML; and what the run leaves, as plain data."""

from __future__ import annotations

import csv
import importlib
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if TYPE_CHECKING:
    from tests.integration.compat.differential import Spec


def framework(name: str) -> Any:
    return importlib.import_module("trainkit" if name == "trainkit" else "lightning.pytorch")


def loaders(spec: Spec) -> tuple[DataLoader, list[DataLoader]]:
    """The training loader and the validation loaders (the first is also the test and predict
    loader), the same tensors under both frameworks."""
    generator = torch.Generator().manual_seed(spec.seed)
    count = 4 * (spec.batches + spec.val_batches * spec.val_loaders)
    x = torch.randn(count, 4, generator=generator)
    y = x.sum(1, keepdim=True) + 0.1 * torch.randn(len(x), 1, generator=generator)
    split = 4 * spec.batches
    train = DataLoader(TensorDataset(x[:split], y[:split]), batch_size=4)
    size = 4 * spec.val_batches
    starts = [split + size * index for index in range(spec.val_loaders)]
    vals = [
        DataLoader(TensorDataset(x[start : start + size], y[start : start + size]), batch_size=4)
        for start in starts
    ]
    return train, vals


def build_module(pl: Any, spec: Spec) -> Any:
    import torchmetrics

    class Drawn(pl.LightningModule):
        def __init__(self, lr: float = 0.05, width: int = 4) -> None:
            super().__init__()
            if spec.hparams == "all":
                self.save_hyperparameters()
            elif spec.hparams == "ignore":
                self.save_hyperparameters(ignore=["width"])
            elif spec.hparams == "logger_false":
                self.save_hyperparameters(logger=False)
            self.lr = lr
            self.automatic_optimization = not spec.manual
            self.layer = nn.Linear(width, 1)
            self.metrics = nn.ModuleDict(  # one per validation loader, as programs do
                {
                    log.name + ("" if index == 0 else f"_{index}"): torchmetrics.MeanSquaredError()
                    for stage, stage_logs in spec.logs.items()
                    for log in stage_logs
                    if log.value.startswith("metric")
                    for index in range(spec.val_loaders if stage == "validation" else 1)
                }
            )
            self.seen: list[dict[str, float]] = []  # callback_metrics in on_train_epoch_end

        def logged(self, stage: str, batch: Any, loader: int = 0) -> torch.Tensor:
            x, y = batch
            prediction = self.layer(x)
            loss = nn.functional.mse_loss(prediction, y)
            for log in spec.logs.get(stage, []):
                value: Any = loss if log.value == "loss" else 2 * loss
                metric = log.name + ("" if loader == 0 else f"_{loader}")
                if log.value == "metric_forward":
                    self.metrics[metric](prediction, y)
                    value = self.metrics[metric]
                elif log.value == "metric_update":
                    updated: Any = self.metrics[metric]
                    updated.update(prediction, y)
                    value = updated
                options = {"on_step": log.on_step, "on_epoch": log.on_epoch}
                self.log(
                    log.name,
                    value,
                    prog_bar=log.prog_bar,
                    logger=log.logger,
                    reduce_fx=log.reduce_fx,
                    **options,
                )
            return loss

        def schedulers(self) -> list[Any]:
            found = self.lr_schedulers()
            return [] if found is None else found if isinstance(found, list) else [found]

        def step_schedulers(self, loss: torch.Tensor) -> None:
            for schedule in self.schedulers():
                plateau = isinstance(schedule, torch.optim.lr_scheduler.ReduceLROnPlateau)
                schedule.step(float(loss)) if plateau else schedule.step()

        def training_step(self, batch, batch_idx):
            loss = self.logged("training", batch)
            if not spec.manual:
                return loss
            found = self.optimizers()
            optimizers = found if isinstance(found, list) else [found]
            for optimizer in optimizers:
                optimizer.zero_grad()
            self.manual_backward(loss)
            for optimizer in optimizers:
                optimizer.step()
            if spec.manual_schedule == "batch":
                self.step_schedulers(loss)
            return loss

        def on_train_epoch_end(self) -> None:
            metrics = self.trainer.callback_metrics
            self.seen.append({name: float(value) for name, value in metrics.items()})
            if spec.epoch_end_logs:
                self.log("train_end", self.layer.weight.detach().sum(), prog_bar=True)
            if spec.manual and spec.manual_schedule == "epoch":
                self.step_schedulers(torch.tensor(float(self.current_epoch)))

        def predict_step(self, batch, batch_idx, dataloader_idx=0):
            return self.layer(batch[0])

        def configure_optimizers(self):
            return optimizer_config(self, spec)

    class Validated(Drawn):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            self.logged("validation", batch, dataloader_idx)

        def on_validation_epoch_end(self) -> None:
            if spec.epoch_end_logs:
                self.log("val_end", self.layer.bias.detach().sum())

    base: Any = Validated if "validation" in spec.logs else Drawn

    class Tested(base):
        def test_step(self, batch, batch_idx):
            self.logged("test", batch)

    if "test" in spec.logs:
        return Tested
    return Validated if "validation" in spec.logs else Drawn


def optimizer_config(module: Any, spec: Spec) -> Any:
    """What ``configure_optimizers`` returns, in the drawn form."""
    layer = module.layer
    if spec.optimizers == 1:
        optimizers = [torch.optim.SGD(layer.parameters(), lr=module.lr)]
    else:
        optimizers = [
            torch.optim.SGD([layer.weight], lr=module.lr),
            torch.optim.Adam([layer.bias], lr=0.01),
        ]

    def schedule(optimizer: torch.optim.Optimizer) -> Any:
        if spec.scheduler == "plateau":
            return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0)
        if spec.scheduler == "exponential":
            return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    def scheduler_dict(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        config: dict[str, Any] = {"scheduler": schedule(optimizer), "interval": spec.interval}
        config["frequency"] = spec.frequency
        if spec.monitor is not None:
            config["monitor"] = spec.monitor
        return config

    form = spec.form
    if form == "optimizer":
        return optimizers[0] if len(optimizers) == 1 else optimizers
    if form == "list":
        return optimizers
    if form == "lists":
        return optimizers, [schedule(optimizer) for optimizer in optimizers]
    if form == "lists_of_dicts":
        return optimizers, [scheduler_dict(optimizer) for optimizer in optimizers]
    if form == "dict_optimizer":
        return {"optimizer": optimizers[0]}
    if form == "dict":
        config: dict[str, Any] = {
            "optimizer": optimizers[0],
            "lr_scheduler": schedule(optimizers[0]),
        }
        if spec.monitor is not None:
            config["monitor"] = spec.monitor
        return config
    if form == "dict_config":
        return {"optimizer": optimizers[0], "lr_scheduler": scheduler_dict(optimizers[0])}
    dicts = [{"optimizer": o, "lr_scheduler": scheduler_dict(o)} for o in optimizers]
    return tuple(dicts) if form == "tuple_of_dicts" else dicts


def build_callbacks(pl: Any, spec: Spec, root: Path) -> list[Any]:
    callbacks: list[Any] = []
    if spec.checkpoint is not None:
        callbacks.append(
            pl.callbacks.ModelCheckpoint(dirpath=str(root / "ckpt"), **spec.checkpoint)
        )
    if spec.early_stopping is not None:
        callbacks.append(pl.callbacks.EarlyStopping(**spec.early_stopping))
    if spec.lr_monitor is not None:
        interval = None if spec.lr_monitor == "none" else spec.lr_monitor
        callbacks.append(pl.callbacks.LearningRateMonitor(logging_interval=interval))
    return callbacks


def batch_end_callback(pl: Any, spec: Spec) -> Any:
    class BatchEnd(pl.Callback):
        def __init__(self) -> None:
            self.seen: list[dict[str, float]] = []  # callback_metrics at each epoch end

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if spec.callback_logs:
                pl_module.log("from_callback", float(batch_idx))
            if trainer.current_epoch == 0 and batch_idx == spec.stop_at:
                trainer.should_stop = True

        def on_train_epoch_end(self, trainer, pl_module):
            metrics = trainer.callback_metrics
            self.seen.append({name: float(value) for name, value in metrics.items()})

    return BatchEnd()


def cli_config(spec: Spec, root: Path) -> dict[str, Any]:
    """The YAML a LightningCLI run of ``spec`` reads (``fit -c``): the Trainer's arguments,
    loggers and callbacks by short class name, the model's and the data's arguments."""
    callbacks = []
    if spec.checkpoint is not None:
        init = {"dirpath": str(root / "ckpt"), **spec.checkpoint}
        callbacks.append({"class_path": "ModelCheckpoint", "init_args": init})
    if spec.early_stopping is not None:
        callbacks.append({"class_path": "EarlyStopping", "init_args": spec.early_stopping})
    if spec.lr_monitor is not None:
        interval = None if spec.lr_monitor == "none" else spec.lr_monitor
        init = {"logging_interval": interval}
        callbacks.append({"class_path": "LearningRateMonitor", "init_args": init})
    loggers = [
        {
            "class_path": kind,
            "init_args": {"save_dir": str(root / "logs"), "name": kind, "version": 0},
        }
        for kind in spec.loggers
    ]
    trainer = {
        "default_root_dir": str(root),
        "logger": loggers,
        "callbacks": callbacks,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": spec.checkpoint is not None,
        "accelerator": "cpu",
        "devices": 1,
        **spec.trainer,
    }
    return {"seed_everything": spec.seed, "trainer": trainer, "model": {"lr": 0.05, "width": 4}}


def run_cli(pl: Any, spec: Spec, root: Path, module_class: type, data_class: type) -> Any:
    """``fit -c config.yaml`` through the framework's LightningCLI, in this process."""
    cli = importlib.import_module(
        "trainkit.cli" if pl.__name__ == "trainkit" else "lightning.pytorch.cli"
    )
    root.mkdir(parents=True, exist_ok=True)
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(cli_config(spec, root)))
    argv = sys.argv
    sys.argv = ["drawn.py"]
    try:
        return cli.LightningCLI(
            module_class,
            data_class,
            args=["fit", "-c", str(path)],
            save_config_kwargs={"overwrite": True},
        )
    finally:
        sys.argv = argv


def data_module_class(pl: Any, spec: Spec) -> type:
    class Data(pl.LightningDataModule):
        def __init__(self, batch_size: int = 4) -> None:
            super().__init__()
            self.train, self.vals = loaders(spec)

        def train_dataloader(self):
            return self.train

        def val_dataloader(self):
            return self.vals[0] if spec.val_loaders == 1 else self.vals

    if "validation" not in spec.logs:
        del Data.val_dataloader
    return Data


def run(name: str, spec: Spec, root: Path) -> dict[str, Any]:
    """Run ``spec`` under ``name`` ('trainkit' or 'lightning') in ``root``; what it left."""
    pl = framework(name)
    if name != "trainkit":  # its warn-once caches are per process: once per run here
        from lightning.pytorch.callbacks import model_checkpoint

        model_checkpoint.warning_cache.clear()
    torch.manual_seed(spec.seed)
    train, vals = loaders(spec)
    module_class = build_module(pl, spec)
    validated = "validation" in spec.logs
    error = trainer = model = None
    callback = batch_end_callback(pl, spec)
    after_fit: dict[str, Any] = {}
    predictions = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if spec.cli:
                cli = run_cli(pl, spec, root, module_class, data_module_class(pl, spec))
                trainer, model = cli.trainer, cli.model
            else:
                loggers = [
                    getattr(pl.loggers, kind)(str(root / "logs"), name=kind, version=0)
                    for kind in spec.loggers
                ]
                callbacks = build_callbacks(pl, spec, root)
                trainer = pl.Trainer(
                    default_root_dir=str(root),
                    logger=loggers,
                    callbacks=[*callbacks, callback],
                    enable_progress_bar=False,
                    enable_model_summary=False,
                    enable_checkpointing=spec.checkpoint is not None,
                    accelerator="cpu",
                    devices=1,
                    **spec.trainer,
                )
                model = module_class()
                val = (vals[0] if spec.val_loaders == 1 else vals) if validated else None
                trainer.fit(model, train, val)
            after_fit = observed_metrics(trainer)
            if spec.validate_after and validated:
                trainer.validate(model, vals[0], verbose=False)
            if "test" in spec.logs:
                trainer.test(model, vals[0], verbose=False)
            if spec.predict:
                predictions = torch.cat(trainer.predict(model, vals[0])).flatten().tolist()
        except (Exception, SystemExit) as raised:
            if isinstance(raised, SystemExit):
                error = [f"exit {raised.code}"]
            else:
                error = [
                    kind.__name__.replace("Exception", "Error") for kind in type(raised).__mro__
                ]
            after_fit = observed_metrics(trainer) if trainer is not None else {}
    if trainer is not None:
        for logger in trainer.loggers:
            logger.finalize("success")
    logs = root / "logs"
    return {
        "error": error,
        "epochs": trainer.current_epoch if trainer is not None else None,
        "global_step": trainer.global_step if trainer is not None else None,
        "trainer": trainer_readout(trainer) if trainer is not None else None,
        "fit": after_fit,
        "end": observed_metrics(trainer) if trainer is not None else {},
        "seen_by_module": getattr(model, "seen", None),
        "seen_by_callback": None if spec.cli else callback.seen,
        "warnings": warning_kinds(caught),
        "csv": csv_rows(logs / "CSVLogger" / "version_0" / "metrics.csv"),
        "hparams": read_yaml(logs / spec.loggers[0] / "version_0" / "hparams.yaml"),
        "config": saved_config(logs / spec.loggers[0] / "version_0" / "config.yaml", root),
        "tensorboard": tensorboard_steps(logs / "TensorBoardLogger" / "version_0"),
        "checkpoints": checkpoints(root / "ckpt"),
        "best": best_checkpoint(trainer),
        "predictions": predictions,
        "weights": [
            float(v) for v in model.layer.weight.flatten().tolist() + model.layer.bias.tolist()
        ]
        if model is not None
        else None,
    }


def best_checkpoint(trainer: Any) -> str | None:
    checkpoint = getattr(trainer, "checkpoint_callback", None) if trainer is not None else None
    if checkpoint is None or not checkpoint.best_model_path:
        return None
    return Path(checkpoint.best_model_path).name


def observed_metrics(trainer: Any) -> dict[str, Any]:
    def numbers(metrics: dict) -> dict[str, float]:
        return {k: float(v) for k, v in metrics.items()}

    return {
        "callback_metrics": numbers(trainer.callback_metrics),
        "logged_metrics": numbers(trainer.logged_metrics),
        "progress_bar": sorted(trainer.progress_bar_metrics),
    }


# ``trainer.*`` read after the run; docs/compat.md lists the members trainkit does not have
READOUT = (
    "current_epoch",
    "global_step",
    "should_stop",
    "num_training_batches",
    "num_val_batches",
    "num_sanity_val_batches",
    "num_test_batches",
    "num_predict_batches",
    "max_epochs",
    "min_epochs",
    "max_steps",
    "min_steps",
    "check_val_every_n_epoch",
    "log_every_n_steps",
    "accumulate_grad_batches",
    "gradient_clip_val",
    "limit_train_batches",
    "limit_val_batches",
    "num_sanity_val_steps",
    "interrupted",
    "sanity_checking",
    "training",
)


def trainer_readout(trainer: Any) -> dict[str, Any]:
    read: dict[str, Any] = {}
    for name in READOUT:
        try:
            value = getattr(trainer, name)
        except Exception as raised:  # the same member raising under both is the same
            value = f"raises {type(raised).__name__}"
        read[name] = [float(v) for v in value] if isinstance(value, list) else value
    read["lrs"] = [group["lr"] for o in trainer.optimizers for group in o.param_groups]
    read["schedulers"] = [
        (c.interval, c.frequency, c.monitor, type(c.scheduler).__name__)
        for c in trainer.lr_scheduler_configs
    ]
    return read


# notes about this machine or a library's own deprecations, not about the program (matched
# without case: JsonargparseDeprecationWarning is Lightning's own use of jsonargparse)
ENVIRONMENT_NOTES = (
    "The `srun` command",
    "`isinstance(treespec",
    "jsonargparse",
    "LeafSpec",
    # torch says it once per process: only the first of the two runs would show it
    "Converting a tensor with requires_grad=True to a scalar",
)


def warning_kinds(caught: list[warnings.WarningMessage]) -> dict[str, str]:
    """Each warning's category and first words: given once or several times."""
    counts: dict[str, int] = {}
    for warning in caught:
        text = f"{warning.category.__name__} {warning.message}"
        if any(note.lower() in text.lower() for note in ENVIRONMENT_NOTES):
            continue
        key = f"{warning.category.__name__}: {str(warning.message).split(chr(10))[0][:60]}"
        counts[key] = counts.get(key, 0) + 1
    return {key: "once" if count == 1 else "several" for key, count in counts.items()}


def csv_rows(path: Path) -> list[list[str]] | None:
    if not path.is_file():
        return None
    with path.open(newline="") as file:
        rows = list(csv.reader(file))
    step = rows[0].index("step")
    return [rows[0]] + [
        [row[step], *(name for name, value in zip(rows[0], row, strict=False) if value)]
        for row in rows[1:]
    ]


def read_yaml(path: Path) -> Any:
    if not path.is_file():
        return None
    return yaml.unsafe_load(path.read_text())


# Trainer arguments docs/compat.md lists as not supported: absent from trainkit's saved config
NOT_SUPPORTED = ("enable_autolog_hparams", "model_registry")


def saved_config(path: Path, root: Path) -> Any:
    """The saved config, class paths shortened to the class name (each framework writes its
    own module), the run's folder written ``<root>``, the Trainer arguments trainkit does not
    support left out."""

    def short(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (v.rsplit(".", 1)[-1] if k == "class_path" else short(v))
                for k, v in value.items()
                if k not in NOT_SUPPORTED
            }
        if isinstance(value, list):
            return [short(v) for v in value]
        if isinstance(value, str):
            return value.replace(str(root), "<root>")
        return value

    return short(read_yaml(path))


def checkpoints(folder: Path) -> dict[str, Any]:
    """Each checkpoint file: its keys (Lightning's version key left out), what it holds."""
    found: dict[str, Any] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        state = torch.load(path, map_location="cpu", weights_only=False)
        found[path.relative_to(folder).as_posix()] = {
            "keys": sorted(state),
            "epoch": state.get("epoch"),
            "global_step": state.get("global_step"),
            "state_dict": sorted(state.get("state_dict", {})),
            "optimizer_states": len(state.get("optimizer_states", [])),
            "lr_schedulers": len(state.get("lr_schedulers", [])),
            "hyper_parameters": dict(state.get("hyper_parameters") or {}),
        }
    return found


def tensorboard_steps(folder: Path) -> dict[str, list[int]] | None:
    if not folder.is_dir():
        return None
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    # sorted: a stage after the fit writes a second events file, and files are read in name
    # order, whose counter (".9", ".10") sorts as text when one process makes many
    steps = {tag: sorted(e.step for e in events.Scalars(tag)) for tag in events.Tags()["scalars"]}
    steps.pop("hp_metric", None)
    return steps
