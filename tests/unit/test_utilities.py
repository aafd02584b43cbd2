"""``trainkit.utilities``: Lightning's utilities at Lightning's paths, each doing what a program
calls it for (``from lightning.pytorch.utilities import ...`` becomes ``from trainkit.utilities
import ...``)."""

from __future__ import annotations

import dataclasses
import random
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from trainkit import TrainModule
from trainkit.utilities import (
    AttributeDict,
    GradClipAlgorithmType,
    LightningEnum,
    disable_possible_user_warnings,
    find_shared_parameters,
    grad_norm,
    is_picklable,
    is_shared_filesystem,
    measure_flops,
    move_data_to_device,
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
    set_shared_parameters,
    suggested_max_num_workers,
)


def test_a_fit_sets_the_rank_and_the_rank_zero_messages_follow_it(make_trainer, capsys):
    rank_zero_only.rank = 5  # what a stale value would be
    make_trainer(max_steps=1).fit(Tiny(), tiny_loader())
    assert rank_zero_only.rank == 0
    rank_zero_info("shown on rank 0")
    with pytest.warns(UserWarning, match="warned on rank 0"):
        rank_zero_warn("warned on rank 0")
    with pytest.warns(DeprecationWarning, match="old"):
        rank_zero_deprecation("old")
    rank_zero_only.rank = 1
    try:
        rank_zero_info("hidden on rank 1")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rank_zero_warn("hidden on rank 1")
        assert rank_zero_only(lambda: "ran", "default")() == "default"
    finally:
        rank_zero_only.rank = 0
    out = capsys.readouterr().out
    assert "shown on rank 0" in out and "hidden" not in out


class Tiny(TrainModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.seen: list[object] = []

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.layer(inputs)

    def training_step(self, batch, batch_idx):
        self.seen.append(batch)
        inputs = batch[0] if isinstance(batch, list | tuple) else batch["a"][0]
        return self.layer(inputs).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def tiny_loader(n: int = 4, batch_size: int = 2) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 2)), batch_size=batch_size)


def test_grad_norm_gives_each_gradients_norm_and_their_total():
    layer = nn.Linear(3, 2)
    layer.weight.grad = torch.full((2, 3), 2.0)
    layer.bias.grad = None
    norms = grad_norm(layer, norm_type=2)
    assert set(norms) == {"grad_2.0_norm/weight", "grad_2.0_norm_total"}
    assert norms["grad_2.0_norm/weight"].item() == pytest.approx((6 * 4) ** 0.5)
    assert norms["grad_2.0_norm_total"].item() == pytest.approx((6 * 4) ** 0.5)
    assert set(grad_norm(layer, "inf", group_separator=".")) == {
        "grad_inf_norm.weight",
        "grad_inf_norm_total",
    }
    with pytest.raises(ValueError, match="norm_type"):
        grad_norm(layer, 0)


def test_measure_flops_counts_a_forward_and_its_backward():
    with torch.device("meta"):
        layer = nn.Linear(10, 5, bias=False)
        inputs = torch.randn(3, 10)
    forward = measure_flops(layer, lambda: layer(inputs))
    assert forward == 2 * 3 * 10 * 5  # a multiply and an add per weight and row
    both = measure_flops(layer, lambda: layer(inputs), lambda out: out.sum())
    assert both == 2 * forward  # the weight's gradient (the input needs none)


def test_move_data_to_device_moves_nested_tensors_and_objects_with_to():
    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor

        def to(self, device: torch.device) -> Batch:
            return Batch(self.x.to(device))

    moved = move_data_to_device({"a": [torch.ones(1)], "b": Batch(torch.ones(1)), "c": 3}, "meta")
    assert moved["a"][0].is_meta and moved["b"].x.is_meta and moved["c"] == 3


def test_shared_parameters_are_found_and_tied_again():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].weight = model[0].weight
    shared = find_shared_parameters(model)
    assert shared == [["0.weight", "1.weight"]]
    model[1].weight = nn.Parameter(model[0].weight.detach().clone())  # e.g. after a copy
    assert find_shared_parameters(model) == []
    set_shared_parameters(model, shared)
    assert model[1].weight is model[0].weight


def test_lightning_enums_compare_with_strings_in_any_case():
    assert GradClipAlgorithmType.NORM == "norm" == GradClipAlgorithmType.from_str("NORM")
    assert GradClipAlgorithmType.from_str("Value", source="value") is GradClipAlgorithmType.VALUE
    assert str(GradClipAlgorithmType.VALUE) == "value"
    assert {GradClipAlgorithmType.VALUE: 1}["value"] == 1
    assert issubclass(GradClipAlgorithmType, LightningEnum)
    with pytest.raises(ValueError, match="expected one of"):
        GradClipAlgorithmType.from_str("max")


def test_the_clip_algorithm_enum_is_a_trainer_argument(make_trainer):
    model = Tiny()
    trainer = make_trainer(
        max_steps=1, gradient_clip_val=1e-3, gradient_clip_algorithm=GradClipAlgorithmType.VALUE
    )
    trainer.fit(model, tiny_loader())
    assert trainer.global_step == 1


def test_possible_user_warnings_can_be_silenced():
    from trainkit.utilities.warnings import PossibleUserWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("before", PossibleUserWarning)
        disable_possible_user_warnings()
        warnings.warn("after", PossibleUserWarning)
        warnings.warn("other", UserWarning)
    assert [str(w.message) for w in caught] == ["before", "other"]


def test_is_picklable_and_attribute_dict():
    from trainkit.utilities.parsing import clean_namespace

    assert is_picklable({"lr": 0.1}) and not is_picklable(lambda: 0)
    hparams = {"lr": 0.1, "schedule": lambda step: step}
    clean_namespace(hparams)
    assert hparams == {"lr": 0.1}
    params = AttributeDict(lr=0.1)
    params.layers = 2
    assert params == {"lr": 0.1, "layers": 2} and params.lr == 0.1


def test_suggested_max_num_workers_shares_the_cpus_between_local_processes():
    import os

    cpus = len(os.sched_getaffinity(0))
    assert suggested_max_num_workers(1) == max(1, cpus - 1)
    assert suggested_max_num_workers(10_000) == 1
    with pytest.raises(ValueError, match="local_world_size"):
        suggested_max_num_workers(0)


def test_is_shared_filesystem_on_one_process_and_for_remote_paths(tmp_path, make_trainer):
    strategy = make_trainer().strategy
    assert is_shared_filesystem(strategy, tmp_path)
    assert is_shared_filesystem(strategy, "s3://bucket/run")


def test_get_filesystem_reads_and_writes_through_fsspec():
    from trainkit.utilities.cloud_io import get_filesystem

    filesystem = get_filesystem("memory://runs/a.txt")
    filesystem.pipe("memory://runs/a.txt", b"hello")
    assert filesystem.cat("memory://runs/a.txt") == b"hello"
    assert get_filesystem("/tmp").protocol in ("file", ("file", "local"))


def test_isolate_rng_leaves_the_generators_as_it_found_them():
    from trainkit.utilities.seed import isolate_rng

    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    expected = (torch.rand(1), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    with isolate_rng():
        torch.rand(5), random.random(), np.random.rand(3)
    assert (torch.rand(1), random.random(), np.random.rand()) == expected


def test_memory_helpers_recognise_out_of_memory_errors():
    from trainkit.utilities.memory import (
        garbage_collection_cuda,
        is_oom_error,
        recursive_detach,
    )

    assert is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert is_oom_error(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried"))
    assert is_oom_error(RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may"))
    assert not is_oom_error(RuntimeError("shape mismatch"))
    garbage_collection_cuda()  # no CUDA here: collects garbage only
    grown = torch.ones(2, requires_grad=True) * 2
    detached = recursive_detach({"loss": grown, "parts": [grown], "n": 1}, to_cpu=True)
    assert not detached["loss"].requires_grad and not detached["parts"][0].requires_grad
    assert detached["n"] == 1


def test_misconfiguration_exception_catches_what_trainkit_raises(make_trainer):
    from trainkit.utilities.exceptions import MisconfigurationException

    class NoOptimizer(Tiny):
        def configure_optimizers(self):
            return "adam"

    with pytest.raises(MisconfigurationException):
        make_trainer(max_steps=1).fit(NoOptimizer(), tiny_loader())


def test_data_helpers(make_trainer):
    from trainkit.utilities.data import (
        extract_batch_size,
        has_iterable_dataset,
        has_len_all_ranks,
        is_dataclass_instance,
    )
    from trainkit.utilities.exceptions import MisconfigurationException

    @dataclasses.dataclass
    class Batch:
        name: str
        x: torch.Tensor

    assert extract_batch_size({"text": "abc", "x": torch.zeros(7, 2)}) == 7
    assert extract_batch_size(Batch("a", torch.zeros(5))) == 5
    assert extract_batch_size([torch.tensor(1.0)]) == 1
    with pytest.raises(MisconfigurationException, match="batch_size"):
        extract_batch_size({"text": "abc"})
    assert is_dataclass_instance(Batch("a", torch.zeros(1))) and not is_dataclass_instance(Batch)

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    assert has_iterable_dataset(DataLoader(Stream())) and not has_iterable_dataset(tiny_loader())
    strategy = make_trainer().strategy
    assert has_len_all_ranks(tiny_loader(), strategy)
    assert not has_len_all_ranks(DataLoader(Stream()), strategy)


def test_lightning_getattr_looks_in_the_module_its_hparams_and_the_datamodule():
    from trainkit.utilities.parsing import lightning_getattr, lightning_hasattr, lightning_setattr

    class WithHparams(Tiny):
        def __init__(self, lr: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()

    model = WithHparams()
    assert lightning_hasattr(model, "lr") and lightning_getattr(model, "lr") == 0.1
    lightning_setattr(model, "lr", 0.5)
    assert model.hparams.lr == 0.5
    assert not lightning_hasattr(model, "batch_size")
    with pytest.raises(AttributeError, match="batch_size"):
        lightning_getattr(model, "batch_size")


def test_is_overridden_and_hook_signatures():
    from trainkit.utilities.model_helpers import is_overridden
    from trainkit.utilities.signature_utils import is_param_in_hook_signature

    assert is_overridden("training_step", Tiny())
    assert not is_overridden("on_fit_start", Tiny())
    assert not is_overridden("training_step", None)

    def with_index(batch, batch_idx): ...

    def without(batch): ...

    def any_args(*args): ...

    assert is_param_in_hook_signature(with_index, "batch_idx")
    assert not is_param_in_hook_signature(without, "batch_idx")
    assert is_param_in_hook_signature(any_args, "batch_idx")
    assert not is_param_in_hook_signature(any_args, "batch_idx", explicit=True)
    assert is_param_in_hook_signature(with_index, "dataloader_idx", min_args=2)


def test_model_summary_counts_layers_and_records_sizes():
    from trainkit.utilities.model_summary import (
        ModelSummary,
        get_formatted_model_size,
        get_human_readable_count,
        parse_batch_shape,
        summarize,
    )

    model = Tiny()
    model.example_input_array = torch.zeros(4, 2)
    model.layer.eval()  # a frozen layer keeps its mode through the example forward
    summary = summarize(model, max_depth=1)
    assert isinstance(summary, ModelSummary)
    assert summary.layer_names == ["layer"] and summary.layer_types == ["Linear"]
    assert summary.param_nums == [3] and summary.total_parameters == 3
    assert summary.in_sizes == [[4, 2]] and summary.out_sizes == [[4, 1]]
    assert summary.training_modes == [False] and model.training
    assert "Total params" in str(summary) and "Linear" in str(summary)
    assert get_human_readable_count(1234) == "1.2 K"
    assert get_formatted_model_size(1.5) == "1.500"
    assert parse_batch_shape([torch.zeros(2, 3), "text"]) == [[2, 3], "?"]


def test_from_compiled_trains_the_original_module_with_a_compiled_forward():
    from trainkit.utilities.compile import from_compiled, to_uncompiled

    model = Tiny()
    compiled = torch.compile(model, backend="eager")
    restored = from_compiled(compiled)
    assert restored is model and "forward" in vars(model)
    assert to_uncompiled(restored) is model and "forward" not in vars(model)
    assert to_uncompiled(compiled) is model
    with pytest.raises(ValueError, match="not made by"):
        from_compiled(model)


def test_step_output_and_optimizer_types_annotate_a_module(make_trainer):
    from trainkit.utilities.types import (
        STEP_OUTPUT,
        LRSchedulerConfig,
        OptimizerLRScheduler,
    )

    class Annotated(Tiny):
        def training_step(self, batch, batch_idx) -> STEP_OUTPUT:
            return super().training_step(batch, batch_idx)

        def configure_optimizers(self) -> OptimizerLRScheduler:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "name": "s"}}

    trainer = make_trainer(max_steps=1)
    trainer.fit(Annotated(), tiny_loader())
    (config,) = trainer.lr_scheduler_configs
    assert isinstance(config, LRSchedulerConfig) and config.name == "s"
    assert not config.reduce_on_plateau and config.strict
