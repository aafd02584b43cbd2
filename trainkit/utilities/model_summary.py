"""``ModelSummary``: a module's layers, parameter counts and, when the module has an
``example_input_array``, each layer's input and output sizes; ``print`` gives the table the
``ModelSummary`` callback prints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from trainkit.callbacks.model_summary import Summary, format_table, human_count
from trainkit.callbacks.model_summary import summarize as summarize_layers
from trainkit.common.properties import TypedProperty

__all__ = [
    "LayerSummary",
    "ModelSummary",
    "get_formatted_model_size",
    "get_human_readable_count",
    "parse_batch_shape",
    "summarize",
]

UNKNOWN_SIZE = "?"
T = TypeVar("T")

get_human_readable_count = human_count


def get_formatted_model_size(total_model_size: float) -> str:
    """A size in MB with three decimals: ``1.234``."""
    return f"{total_model_size:,.3f}"


def parse_batch_shape(batch: object) -> Any:
    """The shape of every tensor in ``batch``, nested like it (``'?'`` for anything else)."""
    if hasattr(batch, "shape"):
        return list(batch.shape)  # pyright: ignore[reportAttributeAccessIssue]
    if isinstance(batch, list | tuple):
        return [parse_batch_shape(item) for item in batch]
    return UNKNOWN_SIZE


class LayerSummary:
    """One layer: its type, parameter count, mode, and the sizes seen by a forward pass."""

    def __init__(self, module: nn.Module) -> None:
        self._module = module
        self._in_size: Any = None
        self._out_size: Any = None
        self._hook: RemovableHandle | None = module.register_forward_hook(self._record)

    def _record(self, module: nn.Module, inputs: tuple[Any, ...], output: object) -> None:
        self._in_size = parse_batch_shape(inputs[0] if len(inputs) == 1 else list(inputs))
        self._out_size = parse_batch_shape(output)
        self.detach_hook()

    def detach_hook(self) -> None:
        """Stop recording sizes."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    @property
    def in_size(self) -> Any:
        return UNKNOWN_SIZE if self._in_size is None else self._in_size

    @property
    def out_size(self) -> Any:
        return UNKNOWN_SIZE if self._out_size is None else self._out_size

    @property
    def layer_type(self) -> str:
        return type(self._module).__name__

    @property
    def num_parameters(self) -> int:
        return sum(
            0 if isinstance(p, nn.parameter.UninitializedParameter) else p.numel()
            for p in self._module.parameters()
        )

    @property
    def training(self) -> bool:
        return self._module.training


def column(read: Callable[[LayerSummary], T]) -> TypedProperty[list[T]]:
    """A column of the summary's table: ``read`` of each summarized layer, in order."""
    return TypedProperty(lambda summary: [read(layer) for layer in summary.summarize().values()])


def total(read: Callable[[Summary], T], doc: str | None = None) -> TypedProperty[T]:
    """A total of the whole model: ``read`` of its summary (every module, at any depth)."""
    return TypedProperty(lambda self: read(self._summary), doc=doc)


class ModelSummary:
    """The layers of ``model`` down to ``max_depth`` (-1: all, 0: none) and its totals."""

    def __init__(self, model: nn.Module, max_depth: int = 1) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < -1:
            raise ValueError(f"ModelSummary max_depth {max_depth!r}; expected an int >= -1")
        self._model = model
        self._max_depth = max_depth
        self._summary: Summary = summarize_layers(model, max_depth)
        modules = dict(model.named_modules())
        self._layers = {row[1]: LayerSummary(modules[row[1]]) for row in self._summary.rows}
        self._forward_example()

    def _forward_example(self) -> None:
        """Run ``example_input_array`` through the model once to record the layers' sizes."""
        example = getattr(self._model, "example_input_array", None)
        modes = [(module, module.training) for module in self._model.modules()]
        try:
            if example is not None:
                self._model.eval()
                with torch.no_grad():
                    if isinstance(example, dict):
                        self._model(**example)
                    elif isinstance(example, list | tuple):
                        self._model(*example)
                    else:
                        self._model(example)
        finally:
            for module, training in modes:  # each layer's own mode back (frozen ones stay eval)
                module.training = training
            for layer in self._layers.values():
                layer.detach_hook()

    @property
    def max_depth(self) -> int:
        return self._max_depth

    def summarize(self) -> dict[str, LayerSummary]:
        """Each summarized layer by name."""
        return dict(self._layers)

    @property
    def named_modules(self) -> list[tuple[str, nn.Module]]:
        modules = dict(self._model.named_modules())
        return [(name, modules[name]) for name in self._layers]

    @property
    def layer_names(self) -> list[str]:
        return list(self._layers)

    layer_types = column(lambda layer: layer.layer_type)
    in_sizes = column(lambda layer: layer.in_size)
    out_sizes = column(lambda layer: layer.out_size)
    param_nums = column(lambda layer: layer.num_parameters)
    training_modes = column(lambda layer: layer.training)

    total_training_modes = total(
        lambda summary: {"train": summary.train_modules, "eval": summary.eval_modules},
        "How many modules (all of them, at any depth) are in train and in eval mode.",
    )
    total_parameters = total(lambda summary: summary.total)
    trainable_parameters = total(lambda summary: summary.trainable)
    model_size = total(lambda summary: summary.size_mb, "The parameters' size in MB.")

    @property
    def total_layer_params(self) -> int:
        return sum(self.param_nums)

    def __str__(self) -> str:
        return format_table(self._summary)

    def __repr__(self) -> str:
        return str(self)


def summarize(lightning_module: nn.Module, max_depth: int = 1) -> ModelSummary:
    """``ModelSummary(lightning_module, max_depth)``."""
    return ModelSummary(lightning_module, max_depth)
