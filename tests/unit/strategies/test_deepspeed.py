"""DeepSpeed strategy configuration: dict, JSON path, environment variable, presets, missing package."""

from __future__ import annotations

import json
import sys

import pytest

from trainkit.errors import ConfigError
from trainkit.strategies.deepspeed import PRESETS, load_config


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


def test_accumulation_is_trainkits_the_engine_told_where_the_window_ends():
    """The engine steps once per micro-batch (its loss unscaled); the micro-batches before an
    accumulation window's last run inside no_backward_sync, which tells the engine it is not at
    a boundary (the matrix in tests/integration/strategies/test_equivalence_matrix.py checks the weights)."""
    pytest.importorskip("deepspeed")
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
