"""Two nodes on one machine: start-up on 2 nodes vs 1, and how soon a node's failure ends the job
on the other. The nodes are network namespaces joined by a bridge (tests/integration/clusters/netns.py;
needs root), so the traffic between them crosses a network interface.

    sudo .venv/bin/python scripts/bench_nodes.py --repeats 3 [--only start-up|failure]

Jobs train tests/integration/clusters's exact regressor (4 steps, batch 4 per rank) with trainkit's own
launcher (NODE_RANK, MASTER_ADDR, MASTER_PORT on each node):

- start-up: launch -> the first training step entered on every rank (a file each rank touches),
  for 1 node x 2 ranks, 1 node x 4 ranks (both in one namespace, over 127.0.0.1) and 2 nodes x
  2 ranks (both launchers started at the same moment);
- failure: node 1 lost mid-training, from the moment it is lost until node 0's launcher has
  returned: its ranks SIGKILLed (its launcher sees it), node 1's launcher and ranks SIGKILLed
  together (trainkit gone there), and node 1 cut off the network (no connection closes: node
  0's ranks wait out a 4 s collective timeout, subtracted here);
- refusal: an unrelated program holds MASTER_PORT on node 0: from both launchers started to
  both refused in one line (exit 2);
- hang: node 1's only rank sleeps in its training_step: from the hang to both launchers
  returned, node 0 naming the late rank (the 4 s collective timeout subtracted).

Prints one JSON line per measurement and a summary table (median of the repeats), with the
reference job of scripts/bench_reference.py (raw torch) timed in the same run beside it, and each
median as a ratio to it. The tests of tests/integration/clusters/test_two_nodes.py check what happens in
these cases; how soon is measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_reference import reference_job_seconds  # noqa: E402

from tests.integration.clusters.netns import Node, nodes_or_skip  # noqa: E402
from tests.integration.clusters.two_nodes import exact_config  # noqa: E402

PY = sys.executable
PORT = "29500"
TIMEOUT_S = 4.0


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return {**base, "PYTHONPATH": str(REPO), **extra}


def launch(node: Node, folder: Path, config: Path, num_nodes: int, **extra: str):
    argv = [PY, "-m", "trainkit", "fit", "-c", str(config), "--trainer.num_nodes", str(num_nodes)]
    argv += ["--trainer.default_root_dir", str(folder / "run")]
    log = (folder / f"node{node.index}.log").open("a")
    return subprocess.Popen(
        node.command(argv), cwd=folder, env=env(**extra), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def wait_files(paths: list[Path], procs: list[subprocess.Popen], limit: float = 300) -> float:
    started = time.monotonic()
    while not all(path.exists() for path in paths):
        if any(proc.poll() is not None for proc in procs):
            raise RuntimeError(f"a launcher ended before its ranks started: {procs[0].args}")
        if time.monotonic() - started > limit:
            raise RuntimeError("no first step")
        time.sleep(0.01)
    return time.monotonic() - started


def finish(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def startup(nodes: list[Node], shape: tuple[int, int], folder: Path) -> float:
    """Seconds from launch to every rank in its first training step."""
    num_nodes, per_node = shape
    marks = folder / "first_step"
    config = exact_config(folder, devices=per_node, touch_file=str(marks), touch_after_steps=0)
    variables = {"MASTER_ADDR": nodes[0].address, "MASTER_PORT": PORT}
    started = time.monotonic()
    procs = [
        launch(node, folder, config, num_nodes, NODE_RANK=str(node.index), **variables)
        for node in nodes[:num_nodes]
    ]
    wait_files([marks], procs)  # touched in the first step; the ranks enter it together
    seconds = time.monotonic() - started
    finish(procs)
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"a launcher failed ({[p.returncode for p in procs]}), see {folder}")
    return seconds


def failure(nodes: list[Node], how: str, folder: Path) -> float:
    """Seconds from node 1 lost to node 0's launcher returned (minus the collective timeout
    where node 1 was cut off)."""
    started_file = folder / "started"
    config = exact_config(folder, sleep_s=1.0, touch_file=str(started_file), touch_after_steps=0)
    extra = {"TRAINKIT_COLLECTIVE_TIMEOUT": f"{TIMEOUT_S:g}"} if how == "network" else {}
    variables = {"MASTER_ADDR": nodes[0].address, "MASTER_PORT": PORT, **extra}
    procs = [
        launch(node, folder, config, 2, NODE_RANK=str(node.index), **variables) for node in nodes
    ]
    try:
        wait_files([started_file], procs)
        lost = time.monotonic()
        if how == "ranks":
            import psutil

            for child in psutil.Process(procs[1].pid).children():
                child.kill()
        elif how == "node":
            os.killpg(procs[1].pid, signal.SIGKILL)
        else:
            nodes[1].unplug()
        procs[0].wait(timeout=300)
        seconds = time.monotonic() - lost - (TIMEOUT_S if how == "network" else 0.0)
    finally:
        nodes[1].plug()
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log = (folder / "node0.log").read_text()
    named = "node 1 (" in log
    if not named:
        raise RuntimeError(f"node 0 did not name node 1:\n{log}")
    return seconds


def port_taken(nodes: list[Node], folder: Path) -> float:
    """Seconds from both launchers started to both refused (exit 2, one line each), with an
    unrelated program holding MASTER_PORT on node 0 (one that accepts and never answers)."""
    ready = folder / "held"
    hold = [PY, "-m", "tests.integration.clusters.hold_port", str(ready), f"port={PORT}"]
    holder = subprocess.Popen(nodes[0].command(hold), cwd=folder, env=env(), start_new_session=True)
    try:
        wait_files([ready], [holder])
        config = exact_config(folder)
        variables = {"MASTER_ADDR": nodes[0].address, "MASTER_PORT": PORT}
        started = time.monotonic()
        procs = [
            launch(node, folder, config, 2, NODE_RANK=str(node.index), **variables)
            for node in nodes
        ]
        codes = [proc.wait(timeout=300) for proc in procs]
        seconds = time.monotonic() - started
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    if codes != [2, 2]:
        raise RuntimeError(f"expected both launchers to refuse (2, 2), got {codes}; see {folder}")
    return seconds


def hung_rank(nodes: list[Node], folder: Path) -> float:
    """Seconds from node 1's only rank hanging in its training_step (a file it writes) to both
    launchers returned, minus the 4 s collective timeout node 0's rank waits out first."""
    fault = folder / "fault_time"
    config = exact_config(folder, devices=1, fault="hang", fault_rank=1, fault_file=str(fault))
    variables = {"MASTER_ADDR": nodes[0].address, "MASTER_PORT": PORT}
    timeout = {"TRAINKIT_COLLECTIVE_TIMEOUT": f"{TIMEOUT_S:g}"}
    procs = [
        launch(node, folder, config, 2, NODE_RANK=str(node.index), **variables, **timeout)
        for node in nodes
    ]
    try:
        wait_files([fault], procs)
        hung = time.monotonic()
        codes = [proc.wait(timeout=300) for proc in procs]
        seconds = time.monotonic() - hung - TIMEOUT_S
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if 0 in codes or "late: rank 1" not in (folder / "node0.log").read_text():
        raise RuntimeError(f"node 0 did not name node 1's late rank ({codes}); see {folder}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("start-up", "failure"), help="one half of the cases")
    args = parser.parse_args()
    reference = reference_job_seconds()
    rows: dict[str, list[float]] = {}
    with nodes_or_skip(2, tag="bn") as nodes, tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            cases = (
                [
                    (f"start-up, {n} x {r} (s)", lambda f, s=(n, r): startup(nodes, s, f))
                    for n, r in ((1, 2), (1, 4), (2, 2))
                ]
                + [
                    (
                        f"node 1 lost: {how} -> node 0 returned (s)",
                        lambda f, h=how: failure(nodes, h, f),
                    )
                    for how in ("ranks", "node", "network")
                ]
                + [
                    (
                        "node 0's MASTER_PORT taken -> both refused (s)",
                        lambda f: port_taken(nodes, f),
                    ),
                    ("node 1's rank hung -> both returned (s)", lambda f: hung_rank(nodes, f)),
                ]
            )
            for name, measure in cases:
                if args.only and not name.startswith(
                    "start-up" if args.only == "start-up" else "node"
                ):
                    continue
                folder = Path(tempfile.mkdtemp(dir=scratch))
                seconds = measure(folder)
                rows.setdefault(name, []).append(seconds)
                print(
                    json.dumps({"case": name, "repeat": repeat, "seconds": round(seconds, 3)}),
                    flush=True,
                )
    print(f"\nreference job (scripts/bench_reference.py): {reference:.2f} s (2.5 s quiet)")
    print(f"{'':<48} median   /ref   runs")
    for name, values in rows.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        median = statistics.median(values)
        print(f"{name:<48} {median:6.2f} {median / reference:6.2f}   {runs}")


if __name__ == "__main__":
    main()
