"""Several "hosts" on one machine: network namespaces, each a node with its own address, joined
by a bridge, so that the tests' traffic between nodes crosses a real network interface.

    tk-<pid>-hub   a bridge br0, one port p<i> per node
    tk-<pid>-n<i>  lo up, eth0 = 10.213.0.<i+1>/24 (the other end of p<i>)

Nothing routes out of them: traffic stays between the nodes (and each node's own loopback).
The names carry the pid of the pytest process that made them, so parallel workers never collide
and namespaces that a killed session left behind are removed by the next one. Needs root (and
``ip`` from iproute2): ``nodes_or_skip`` skips, saying why, where namespaces cannot be made.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

PREFIX = "tk-"
SUBNET = "10.213.0"
STALE = re.compile(rf"^{PREFIX}(\d+)-(?:[a-z0-9]+-)?(?:hub|n\d+)$")


@dataclass(frozen=True)
class Node:
    """One namespace standing for one host."""

    index: int
    namespace: str
    address: str
    hub: str  # the bridge's namespace
    port: str  # this node's port on the bridge

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this node: in its network namespace only (``ip netns exec``
        would also mount a /sys of its own, without the cgroups slurmd needs)."""
        return enter(self.namespace, argv)

    def unplug(self) -> None:
        """Take this node off the network (its cable pulled): no packet reaches it any more,
        and no connection is closed."""
        ip("-n", self.hub, "link", "set", self.port, "down")

    def plug(self) -> None:
        """Put this node back on the network."""
        ip("-n", self.hub, "link", "set", self.port, "up")


def enter(namespace: str, argv: list[str]) -> list[str]:
    return ["nsenter", f"--net=/var/run/netns/{namespace}", *argv]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def namespaces() -> list[str]:
    listed = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def remove_stale() -> None:
    """Remove the namespaces of test sessions whose process is gone."""
    for name in namespaces():
        match = STALE.match(name)
        if match and not pid_runs(int(match.group(1))):
            ip("netns", "del", name, check=False)


def pid_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def create(count: int, tag: str) -> list[Node]:
    """``count`` nodes on one bridge; names ``tk-<pid>[-tag]-...``."""
    base = f"{PREFIX}{os.getpid()}{f'-{tag}' if tag else ''}"
    hub = f"{base}-hub"
    ip("netns", "add", hub)
    ip("-n", hub, "link", "add", "br0", "type", "bridge")
    ip("-n", hub, "link", "set", "br0", "up")
    nodes = []
    for index in range(count):
        node = Node(index, f"{base}-n{index}", f"{SUBNET}.{index + 1}", hub, f"p{index}")
        ip("netns", "add", node.namespace)
        ip("link", "add", "eth0", "netns", node.namespace, "type", "veth", "peer", "name",
           node.port, "netns", hub)  # fmt: skip
        ip("-n", hub, "link", "set", node.port, "master", "br0")
        ip("-n", hub, "link", "set", node.port, "up")
        ip("-n", node.namespace, "link", "set", "lo", "up")
        ip("-n", node.namespace, "addr", "add", f"{node.address}/24", "dev", "eth0")
        ip("-n", node.namespace, "link", "set", "eth0", "up")
        nodes.append(node)
    return nodes


def remove(tag: str) -> None:
    """Remove every namespace of this process with ``tag`` (a node's processes keep theirs
    until they end; the tests end them first)."""
    base = f"{PREFIX}{os.getpid()}{f'-{tag}' if tag else ''}-"
    for name in namespaces():
        if name.startswith(base) and STALE.match(name):
            ip("netns", "del", name, check=False)


def cannot_make_namespaces() -> str:
    """Why this machine cannot make namespaces here ("" when it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for program, package in (("ip", "iproute2"), ("nsenter", "util-linux")):
        if shutil.which(program) is None:
            return f"{program} ({package}) is not installed: apt-get install {package}"
    probe = f"{PREFIX}{os.getpid()}-probe-n0"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed here: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return ""


@contextlib.contextmanager
def nodes_or_skip(count: int = 2, tag: str = "") -> Iterator[list[Node]]:
    """``count`` nodes for the duration of the block, always removed afterwards; a skip with
    the reason where namespaces cannot be made."""
    import pytest

    reason = cannot_make_namespaces()
    if reason:
        pytest.skip(reason)
    remove_stale()
    try:
        try:
            made = create(count, tag)
        except RuntimeError as err:  # namespaces, but no bridge or veth pairs here
            pytest.skip(f"could not build the nodes' network here: {err}")
        yield made
    finally:
        remove(tag)


HOSTS_ENV = "TK_NETNS_HOSTS"  # address=namespace,... : where the launch agent finds each node


def agent_env(nodes: list[Node]) -> dict[str, str]:
    """What ``python -m tests.integration.clusters.netns`` needs to reach ``nodes``, as environment."""
    return {HOSTS_ENV: ",".join(f"{node.address}={node.namespace}" for node in nodes)}


def agent(argv: list[str]) -> None:
    """A launch agent in the manner of ssh (OpenMPI's plm_rsh_agent): ``HOST COMMAND...`` runs
    COMMAND through a shell inside the namespace of the node whose address is HOST."""
    host, command = argv[0], " ".join(argv[1:])
    hosts = dict(item.split("=", 1) for item in os.environ[HOSTS_ENV].split(","))
    argv = enter(hosts[host], ["/bin/sh", "-c", command])
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    import sys

    agent(sys.argv[1:])
