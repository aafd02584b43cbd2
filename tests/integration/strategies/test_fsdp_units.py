"""A plain ``strategy: fsdp`` on 2 gloo ranks shards every layer of a million parameters or more
as its own unit (gathered one at a time, not the whole model), and a parameter used outside the
unit holding it is an error that names the units and the fixes."""

from __future__ import annotations

import pytest

from tests.helpers.command_env import cli_env

CONFIG = """
seed_everything: 7
model:
  class_path: {model}
data:
  class_path: {data}
trainer:
  max_steps: 2
  devices: 2
  strategy: {strategy}
  enable_progress_bar: false
  enable_checkpointing: false
  logger: false
  callbacks:
    - class_path: tests.helpers.sharded_models.ShardUnitProbe
"""
LAYERS = {
    "model": "tests.helpers.sharded_models.LayerStack\n  init_args: {width: 1024, depth: 2}",
    "data": "tests.helpers.sharded_models.StackData\n  init_args: {width: 1024, samples: 16}",
}
SHARED = {
    "model": "tests.helpers.sharded_models.SharedEmbeddingHead",
    "data": "tests.helpers.sharded_models.TokenData",
}
ONE_UNIT = "\n    class_path: trainkit.strategies.FSDPStrategy\n    init_args: {min_num_params: 0}"


def fit(run_main, tmp_path, strategy: str, **model_and_data: str) -> tuple[int, str]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(strategy=strategy, **model_and_data))
    done = run_main(
        "fit", "-c", str(config), "--trainer.default_root_dir", str(tmp_path), env=cli_env()
    )
    return done.returncode, done.stderr


@pytest.mark.timeout(200)
def test_plain_fsdp_shards_each_large_layer_as_its_own_unit(run_main, tmp_path, no_leftovers):
    code, err = fit(run_main, tmp_path, "fsdp", **LAYERS)  # 2 x Linear(1024, 1024), 1.05M each
    assert code == 0, err[-4000:]
    for rank in (0, 1):
        assert (tmp_path / f"units_rank{rank}.txt").read_text() == "layers.0 layers.1"


@pytest.mark.timeout(300)
def test_a_parameter_used_outside_its_unit_names_the_units_and_trains_as_one_unit(
    run_main, tmp_path, no_leftovers
):
    code, err = fit(run_main, tmp_path, "fsdp", **SHARED)
    assert code == 2  # the user's code cannot work as written: one line, no traceback
    assert "trainkit: error: fsdp: a parameter of a shard unit was used outside" in err
    assert "embed (Embedding, 1,280,000 parameters)" in err and "min_num_params=0" in err
    code, err = fit(run_main, tmp_path, ONE_UNIT, **SHARED)
    assert code == 0, err[-4000:]
    assert (tmp_path / "units_rank0.txt").read_text() == ""  # the root unit holds everything
