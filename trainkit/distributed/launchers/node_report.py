"""What a node's launcher says about the other nodes of its job when its own ranks only lost
contact with them or waited in a collective that timed out: which node failed and how, which
does not answer, which rank (on which node) was late. Pure: statuses in, lines out."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from trainkit.distributed.rank_board import RankPosition, behind, late_ranks, listed
from trainkit.distributed.signals import PREEMPTED_EXIT_CODE


@dataclass(frozen=True)
class NodeAnswer:
    """What one other node's launcher said about itself (``status`` None: no answer)."""

    node: int
    name: str  # "node 1 (host, 10.0.0.2)"
    status: dict[str, Any] | None
    why_silent: str = ""  # without an answer: refused, timed out, ...


def node_name(node: int, host: str, address: str) -> str:
    """``node 1 (host, 10.0.0.2)``: the node rank, then where it runs."""
    where = ", ".join(dict.fromkeys(part for part in (host, address) if part))
    return f"node {node} ({where})" if where else f"node {node}"


def positions_of(status: dict[str, Any]) -> list[RankPosition]:
    """The rank positions a status carries."""
    return [
        RankPosition(
            r["rank"],
            r["phase"],
            r["epoch"],
            r["batch"],
            r["seconds"],
            r.get("in_collective", False),
        )
        for r in status.get("ranks", [])
        if "phase" in r
    ]


def silent_line(answer: NodeAnswer) -> str:
    """A node whose launcher did not answer, and what that means."""
    if "refused" in answer.why_silent.lower():  # the machine is there, trainkit is not
        meaning = "its trainkit launcher is gone with its ranks (killed, or the machine restarted)"
    else:
        meaning = "the machine, or the network to it, is down"
    return f"{answer.name} does not answer ({answer.why_silent}): {meaning}"


def ended_ranks(status: dict[str, Any]) -> str:
    """``rank 2 was killed by SIGKILL``: the ranks of a node that ended badly, as its launcher
    saw them (a node asked before its launcher reported)."""
    ended = []
    for rank in status.get("ranks", []):
        code = rank.get("exit")
        if code is None or code in (0, PREEMPTED_EXIT_CODE):
            continue
        if code < 0:
            ended.append(f"rank {rank['rank']} was killed by {signal.Signals(-code).name}")
        else:
            ended.append(f"rank {rank['rank']} failed with exit code {code}")
    return ", ".join(ended)


def lost_contact(answers: list[NodeAnswer]) -> list[str]:
    """This node's ranks lost contact with their peers: the nodes that failed or are gone."""
    lines = []
    for answer in answers:
        if answer.status is None:
            lines.append(f"{silent_line(answer)}; this node's ranks lost contact with it")
            continue
        cause = answer.status.get("cause") or ended_ranks(answer.status)
        if cause:
            lines.append(
                f"the job failed on {answer.name}: {cause}; this node's ranks only lost contact "
                "with it"
            )
    return lines


def timed_out(own: list[RankPosition], answers: list[NodeAnswer]) -> list[str]:
    """A collective timed out: the late ranks of the whole job, each named with its node, from
    the boards the other nodes sent, and the nodes that did not answer. Empty where the late
    rank is on this node and every other node answered (this node's own report names it)."""
    everyone = list(own)
    node_of: dict[int, str] = {}
    for answer in answers:
        if answer.status is not None:
            for position in positions_of(answer.status):
                everyone.append(position)
                node_of[position.rank] = answer.name
    silent = [silent_line(answer) for answer in answers if answer.status is None]
    late, waiting = late_ranks(everyone, other_nodes=bool(silent))
    late_elsewhere = [p for p in late if p.rank in node_of]
    if late_elsewhere:
        by_node: dict[str, list[RankPosition]] = {}
        for position in late_elsewhere:
            by_node.setdefault(node_of[position.rank], []).append(position)
        where = "; ".join(f"{listed(ranks)} on {name}" for name, ranks in by_node.items())
        return [f"a collective timed out: late: {where}; waiting: {listed(waiting) or 'none'}"]
    # this node's ranks all at one point (a collective inside a step counts: DDP's buffer
    # broadcast in forward), or behind only inside a collective, and a node that does not
    # answer: that node is the cause
    if silent and (not behind(own) or not late):
        return [
            f"a collective timed out with every rank of this node waiting ({listed(own)}): "
            + "; ".join(silent)
        ]
    if not late and answers:  # every node answered, every rank of the job waits
        return [
            f"a collective timed out with every rank of every node waiting ({listed(everyone)}): "
            "some rank called a collective the others never call"
        ]
    return silent
