"""Stop signals held from the first instruction of a rank: one that arrives during start-up is
handed to fit, and the previous handlers come back afterwards."""

from __future__ import annotations

import os
import signal

from trainkit.distributed.signals import StopSignals, hold_stop_signals, installed_stop_signals


def test_a_signal_held_from_start_up_is_handed_to_fit(tmp_path):
    previous = signal.getsignal(signal.SIGUSR1)
    with hold_stop_signals():
        os.kill(os.getpid(), signal.SIGUSR1)
        watcher = StopSignals()
        watcher.install()
        assert watcher.received == signal.SIGUSR1  # fit stops at its first safe point
        watcher.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == previous and installed_stop_signals() is None
