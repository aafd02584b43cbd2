"""The rendezvous beacon: the ranks of a step find the port of their own step's store, past a
taken port and past another step's beacon."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.launcher_env import SRUN_TASK
from trainkit.distributed.env import detect_environment
from trainkit.distributed.rendezvous import candidate_ports, find_store_port, open_beacon


def test_ranks_find_their_steps_beacon_past_a_taken_port_and_another_steps_beacon():
    env = detect_environment(SRUN_TASK)
    first, second, third = candidate_ports(env.main_port)[:3]
    beacons = []
    with socket.socket() as taken:
        try:
            taken.bind(("", first))
        except OSError:
            pytest.skip(f"port {first} is in use here")
        taken.listen()  # an unrelated program that never answers
        try:
            beacons.append(open_beacon(env, b"trainkit 1111 slurm job 3 step 9 world 2\n"))
            beacons.append(open_beacon(env, b"trainkit 2222 slurm job 3 step 0 world 2\n"))
            assert [beacon.port for beacon in beacons] == [second, third]
            assert find_store_port(env, "slurm job 3 step 0 world 2", timeout=30) == 2222
        finally:
            for beacon in beacons:
                beacon.close()
