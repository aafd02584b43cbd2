"""ddp2 on CPU: one process per "node" (two launchers, fake node ranks), dp over 2 simulated
devices inside each, gradients all-reduced across the nodes for real over gloo."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import REPO, cli_env
from trainkit.distributed.ports import find_free_port

ARGS = [
    "-c",
    str(REPO / "configs" / "autoencoder.yaml"),
    "--model",
    "tests.helpers.probes.NodeBatchProbe",
    "--trainer.max_epochs",
    "1",
    "--data.init_args.shuffle",
    "false",
    "--optimizer",
    "SGD",
    "--optimizer.lr",
    "0.1",
    "--trainer.num_sanity_val_steps",
    "0",
]


@pytest.mark.timeout(150)
def test_ddp2_two_nodes_match_one_process_with_the_whole_batch(start_cli, run_main, tmp_path):
    port = str(find_free_port())
    nodes = [
        start_cli(
            "fit",
            *ARGS,
            "--trainer.strategy",
            "ddp2",
            "--trainer.num_nodes",
            "2",
            "--trainer.devices",
            "2",
            "--data.init_args.batch_size",
            "64",
            root=tmp_path / "ddp2",
            env=cli_env(NODE_RANK=str(node), MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
        )
        for node in (0, 1)
    ]
    outputs = [node.communicate(timeout=280) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err for _, err in outputs]
    assert (
        "node 0 step_end batch 64" in outputs[0][0] and "node 1 step_end batch 64" in outputs[1][0]
    )
    assert (
        "effective batch" in outputs[0][0]
        and " 128" in outputs[0][0].split("effective batch")[1].splitlines()[0]
    )
    single = run_main(
        "fit", *ARGS, "--data.init_args.batch_size", "128",
        "--trainer.default_root_dir", str(tmp_path / "single"), env=cli_env(),
    )  # fmt: skip
    assert single.returncode == 0, single.stderr
    ddp2 = torch.load(next((tmp_path / "ddp2").glob("**/last.ckpt")), weights_only=True)[
        "state_dict"
    ]
    reference = torch.load(next((tmp_path / "single").glob("**/last.ckpt")), weights_only=True)[
        "state_dict"
    ]
    for key, value in reference.items():
        torch.testing.assert_close(ddp2[key], value, rtol=0, atol=1e-6)
