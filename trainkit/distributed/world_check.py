"""Under an external launcher (srun, torchrun, mpirun, a PyTorchJob) the config and the launcher
must agree on the world: the same nodes and the same ranks per node. A mismatch is a one-line
error before anything trains, naming both numbers and the fix; trainkit never trains a world
nobody asked for. The launcher's numbers and their words come with its environment
(``ClusterEnvironment.launcher_words``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy


def check_launched_world(strategy: Strategy) -> None:
    """Refuse, before training, a world that the external launcher and the config disagree on."""
    cluster = strategy.cluster
    words = cluster.launcher_words
    if words is None:  # no launcher, or trainkit's own (which starts what the config asks)
        return
    asked_nodes, asked_local = strategy.num_nodes, strategy.processes_per_node
    if cluster.num_nodes != asked_nodes:
        raise ConfigError(
            "trainer.num_nodes",
            asked_nodes,
            f"{cluster.num_nodes}, the nodes {words.command} runs on "
            f"({words.nodes_variable}={cluster.num_nodes})",
            f"set trainer.num_nodes: {cluster.num_nodes}, or start "
            + words.nodes_fix.format(n=asked_nodes),
        )
    # a launcher per node (one srun task each) starts the node's ranks itself: nodes only
    if cluster.local_world_size == asked_local or not cluster.creates_processes_externally:
        return
    one_per_device = strategy.process_per_device
    what = "trainer.devices" if one_per_device else f"ranks per node of strategy {strategy.name}"
    fix = (
        f"set trainer.devices: {cluster.local_world_size}, or start {asked_local} per node: "
        if one_per_device
        else f"start {asked_local} per node: "
    ) + words.per_node_fix.format(n=asked_local)
    raise ConfigError(
        what,
        asked_local,
        f"{cluster.local_world_size}, the ranks per node {words.command} started "
        f"({words.per_node_variable}={cluster.local_world_size})",
        fix + words.per_node_alternative,
    )
