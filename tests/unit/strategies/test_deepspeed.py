"""DeepSpeed strategy configuration: dict, JSON path, environment variable, presets, missing
package, what it refuses, and the type of its weights."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from trainkit.devices import DeviceSelection
from trainkit.distributed.environments import LoneEnvironment
from trainkit.errors import ConfigError
from trainkit.strategies import Placement, select_strategy
from trainkit.strategies.deepspeed import PRESETS, engine_dtype, load_config

NEEDS_DEEPSPEED = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="pip install 'trainkit[deepspeed]'"
)


def test_config_from_dict_path_env_and_default(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINKIT_DEEPSPEED_CONFIG_PATH", raising=False)
    assert load_config({"zero_optimization": {"stage": 3}}) == {"zero_optimization": {"stage": 3}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 1}}))
    assert load_config(str(path))["zero_optimization"]["stage"] == 1
    assert load_config(None) == {"zero_optimization": {"stage": 2}}
    monkeypatch.setenv("TRAINKIT_DEEPSPEED_CONFIG_PATH", str(path))
    assert load_config(None)["zero_optimization"]["stage"] == 1


def test_bad_config_paths_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"nope\.json"):
        load_config(str(tmp_path / "nope.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{stage: 2")
    with pytest.raises(ConfigError, match="valid JSON"):
        load_config(str(broken))


def test_presets_cover_stages_and_offload():
    assert set(PRESETS) == {
        "deepspeed_stage_1",
        "deepspeed_stage_2",
        "deepspeed_stage_3",
        "deepspeed_stage_2_offload",
        "deepspeed_stage_3_offload",
    }
    assert PRESETS["deepspeed_stage_3_offload"]["zero_optimization"]["offload_param"] == {
        "device": "cpu"
    }


def test_missing_package_says_how_to_install_and_names_fsdp(monkeypatch):
    from trainkit import Trainer

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # makes `import deepspeed` fail
    with pytest.raises(
        ConfigError, match=r"pip install -e '\.\[deepspeed\]'.*fsdp with cpu_offload"
    ):
        Trainer(accelerator="cpu", devices=2, strategy="deepspeed_stage_2")


@NEEDS_DEEPSPEED  # found, not imported: importing it runs programs (uname, a compiler)
def test_accumulation_is_trainkits_the_engine_told_where_the_window_ends():
    """The engine steps once per micro-batch (its loss unscaled); the micro-batches before an
    accumulation window's last run inside no_backward_sync, which tells the engine it is not at
    a boundary (the matrix in tests/integration/strategies/test_equivalence_matrix.py checks the weights)."""
    from trainkit import Trainer

    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="deepspeed_stage_2", accumulate_grad_batches=2
    )
    boundaries: list[bool] = []

    class Engine:
        def set_gradient_accumulation_boundary(self, is_boundary: bool) -> None:
            boundaries.append(is_boundary)

    strategy = trainer.strategy
    strategy._engine = Engine()
    with strategy.no_backward_sync(None):
        assert boundaries == [False]
    assert boundaries == [False, True]


@pytest.mark.parametrize(
    ("config", "dtype"),
    [
        ({"bf16": {"enabled": True}}, torch.bfloat16),
        ({"bfloat16": {"enabled": True}}, torch.bfloat16),
        ({"fp16": {"enabled": True, "loss_scale": 0}}, torch.float16),
        ({"fp16": {"enabled": False}}, None),
        ({"zero_optimization": {"stage": 2}}, None),
    ],
)
def test_the_engines_weight_type_is_its_enabled_precision_section(config, dtype):
    assert engine_dtype(config) == dtype


@NEEDS_DEEPSPEED  # found, not imported: importing it runs programs (uname, a compiler)
def test_deepspeed_refuses_clipping_by_value_in_one_line():
    placement = Placement(
        DeviceSelection("cpu", (0, 1)),
        1,
        LoneEnvironment(),
        gradient_clip_val=0.5,
        gradient_clip_algorithm="value",
    )
    with pytest.raises(ConfigError, match=r"gradient_clip_algorithm 'value'; expected 'norm'"):
        select_strategy("deepspeed_stage_2", placement)
