"""Which submodules fsdp shards as units of their own: by default every module with at least a
million parameters not already in a smaller unit, so a plain ``strategy="fsdp"`` gathers one
layer at a time instead of the whole model. Checked on meta-device models, without ranks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainkit.errors import ConfigError
from trainkit.strategies import FSDPStrategy
from trainkit.strategies.shard_units import DEFAULT_MIN_NUM_PARAMS, describe_units, shard_units


def on_meta(build):
    with torch.device("meta"):
        return build()


class Block(nn.Module):
    """Four 600x600 projections (360,600 parameters each: 1,442,400 together) and a norm."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(600, 600) for _ in range(4))
        self.norm = nn.LayerNorm(600)


def units_of(model: nn.Module, class_names=(), min_num_params=DEFAULT_MIN_NUM_PARAMS):
    names = {id(sub): name for name, sub in model.named_modules()}
    return [names[id(u)] for u in shard_units(model, list(class_names), min_num_params)]


def test_by_default_each_layer_of_a_million_parameters_is_a_unit():
    model = on_meta(lambda: nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(8)]))
    assert FSDPStrategy().min_num_params == DEFAULT_MIN_NUM_PARAMS == 1_000_000
    assert units_of(model) == [str(i) for i in reversed(range(8))]  # children before parents


def test_a_small_model_stays_one_unit():
    model = on_meta(lambda: nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)))
    assert units_of(model) == []  # everything in the root unit


def test_small_layers_are_grouped_into_their_parent_once_it_holds_enough():
    model = on_meta(lambda: nn.Sequential(Block(), nn.Linear(1024, 1024)))
    # each projection is too small; the block's 1.44M (norm included) make it one unit
    assert units_of(model) == ["1", "0"]


def test_containers_without_forward_are_never_units_their_parent_is():
    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(600, 600) for _ in range(4))

    model = on_meta(lambda: nn.Sequential(Stack()))
    assert units_of(model) == ["0"]  # the Stack, not its ModuleList


def test_a_parameter_shared_with_a_module_outside_keeps_both_in_a_common_unit():
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(5000, 256)  # 1.28M parameters
            self.head = nn.Linear(256, 5000, bias=False)
            self.head.weight = self.embed.weight

    model = on_meta(lambda: nn.Sequential(Tied()))
    assert units_of(model) == ["0"]  # neither embed nor head alone: the module holding both


def test_class_names_replace_the_size_rule_unless_it_is_also_given():
    model = on_meta(lambda: nn.Sequential(Block(), nn.Linear(1024, 1024)))
    assert FSDPStrategy(auto_wrap_policy=["Block"]).min_num_params == 0
    assert units_of(model, ["Block"], 0) == ["0"]
    assert units_of(model, ["Block"], 1_000_000) == ["1", "0"]
    assert units_of(model, ["LayerNorm"], 0) == ["0.norm"]


def test_classes_match_themselves_and_their_subclasses_as_in_lightning():
    model = on_meta(lambda: nn.Sequential(Block(), nn.Linear(1024, 1024)))
    strategy = FSDPStrategy(auto_wrap_policy={nn.Linear})  # Lightning's set of classes
    assert strategy.auto_wrap_policy == [nn.Linear] and strategy.min_num_params == 0
    assert units_of(model, [nn.Linear], 0) == ["1", "0.o", "0.v", "0.k", "0.q"]


def test_a_policy_that_is_not_classes_is_a_config_error_naming_the_accepted_forms():
    with pytest.raises(ConfigError, match=r"expected module class names or classes"):
        FSDPStrategy(auto_wrap_policy=lambda module, recurse, nonwrapped_numel: True)  # type: ignore[arg-type]


def test_min_num_params_zero_makes_the_whole_model_one_unit():
    model = on_meta(lambda: nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(2)]))
    assert FSDPStrategy(min_num_params=0).min_num_params == 0
    assert units_of(model, min_num_params=0) == []


def test_a_negative_min_num_params_is_a_config_error_naming_the_accepted_values():
    with pytest.raises(ConfigError, match=r"min_num_params -1; expected an int >= 0 or None"):
        FSDPStrategy(min_num_params=-1)


def test_units_are_described_by_name_class_and_size():
    model = on_meta(lambda: nn.Sequential(nn.Linear(2048, 2048), nn.Linear(8, 8)))
    units = shard_units(model, [], DEFAULT_MIN_NUM_PARAMS)
    assert describe_units(model, units) == "0 (Linear, 4,196,352 parameters)"
