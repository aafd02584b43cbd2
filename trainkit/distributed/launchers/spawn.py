"""ddp_spawn: start ranks from this Python process and bring rank 0's results back."""

from __future__ import annotations

import io
import os
import pickle
import sys
from typing import TYPE_CHECKING, Any

import torch

from trainkit.distributed.env import detect_environment
from trainkit.distributed.ports import find_free_port
from trainkit.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


def unpicklable_path(
    obj: Any, path: str, seen: set[int] | None = None, depth: int = 0
) -> str | None:
    """The attribute path of the first value in ``obj`` that cannot be pickled, or None."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 8:
        return None
    seen.add(id(obj))
    try:
        pickle.dumps(obj)
        return None
    except Exception:
        pass
    children: list[tuple[str, Any]] = []
    if isinstance(obj, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, list | tuple):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__"):
        attrs = dict(vars(obj))
        for group in ("_modules", "_parameters", "_buffers"):
            attrs.update(attrs.pop(group, {}) or {})
        children = [(f"{path}.{k}", v) for k, v in attrs.items() if k != "_trainer"]
    for child_path, child in children:
        found = unpicklable_path(child, child_path, seen, depth + 1)
        if found is not None:
            return found
    return f"{path}: {type(obj).__module__}.{type(obj).__qualname__}"


def check_picklable(items: dict[str, Any]) -> None:
    for name, obj in items.items():
        found = unpicklable_path(obj, name)
        if found is not None:
            raise MisconfigurationError(
                f"ddp_spawn must pickle everything it sends to the ranks, but {found} cannot be "
                "pickled; create it in setup() instead, or use strategy: ddp"
            )


def spawn_stage(
    trainer: Trainer, stage: str, model: Any, datamodule: Any, ckpt_path: Any, loaders: tuple
) -> Any:
    """Run ``stage`` on world_size spawned ranks; the caller's model gets rank 0's weights."""
    import torch.multiprocessing as mp

    strategy = trainer.strategy
    model.trainer = None
    check_picklable(
        {
            "model": model,
            "datamodule": datamodule,
            "callbacks": trainer.callbacks,
            "dataloaders": loaders,
        }
    )
    context = mp.get_context(strategy.start_method)
    queue = context.SimpleQueue()
    port = find_free_port()
    mp.start_processes(
        _run_rank,
        args=(trainer, stage, model, datamodule, ckpt_path, loaders, port, queue),
        nprocs=strategy.selection.count,
        start_method=strategy.start_method,
    )
    result = torch.load(io.BytesIO(queue.get()), weights_only=False)
    model.load_state_dict(result["state_dict"])
    trainer.lightning_module, model.trainer = model, trainer
    trainer.datamodule = datamodule
    trainer.current_epoch, trainer.global_step = result["epoch"], result["global_step"]
    trainer._epoch_metrics = result["metrics"]
    trainer._log_dir = result["log_dir"]
    for callback in trainer.callbacks:
        state = result["callbacks"].get(callback.state_key)
        if state:
            callback.load_state_dict(state)
    return result["output"]


def _run_rank(
    local_rank: int,
    trainer: Trainer,
    stage: str,
    model: Any,
    datamodule: Any,
    ckpt_path: Any,
    loaders: tuple,
    port: int,
    queue: Any,
) -> None:
    strategy = trainer.strategy
    count = strategy.selection.count
    node_rank = int(os.environ.get("NODE_RANK", 0))
    os.environ.update(
        MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
        MASTER_PORT=str(port),
        WORLD_SIZE=str(count * strategy.num_nodes),
        NODE_RANK=str(node_rank),
        LOCAL_RANK=str(local_rank),
        RANK=str(node_rank * count + local_rank),
        LOCAL_WORLD_SIZE=str(count),
    )
    trainer.cluster = detect_environment()
    strategy.connect(trainer.selection, strategy.num_nodes, trainer.cluster)
    output = trainer._run_stage(stage, model, datamodule, ckpt_path, loaders)
    if trainer.is_global_zero:
        result = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "metrics": {
                k: v.detach().cpu() if hasattr(v, "detach") else v
                for k, v in trainer._epoch_metrics.items()
            },
            "log_dir": trainer.log_dir,
            "callbacks": {cb.state_key: cb.state_dict() for cb in trainer.callbacks},
            "output": output,
        }
        buffer = (
            io.BytesIO()
        )  # bytes, not shared-memory tensors: this rank exits before the parent reads
        torch.save(result, buffer)
        queue.put(buffer.getvalue())
    strategy.barrier()
    strategy.teardown()


def use_forked_ranks(trainer: Trainer) -> None:
    """Interactive sessions (notebook, stdin, ``python -c``) cannot be re-executed: fork the ranks."""
    from trainkit.strategies import DDPSpawnStrategy

    old = trainer.strategy
    names = (
        "find_unused_parameters",
        "static_graph",
        "gradient_as_bucket_view",
        "process_group_backend",
        "timeout",
    )
    trainer.strategy = DDPSpawnStrategy(**{name: getattr(old, name) for name in names})
    trainer.strategy.sync_batchnorm = old.sync_batchnorm
    trainer.strategy.connect(trainer.selection, trainer.num_nodes, trainer.cluster)
    trainer.strategy.start_method = "fork"
    print(
        "trainkit: this Python session cannot be re-run per rank (interactive); starting the "
        f"{trainer.strategy.world_size} ranks as forked processes (ddp_spawn, start method fork)",
        file=sys.stderr,
        flush=True,
    )
