"""Where the run is, in Lightning's words: epoch, steps and batches of the loop position, the
stop state (``should_stop``, preemption), the checkpoint a stage loaded, and the fit's size."""

from __future__ import annotations

from trainkit.state import RunState


class PositionReadouts:
    """The loop position, the stop state and the checkpoint path (Lightning's names)."""

    run_state: RunState

    @property
    def current_epoch(self) -> int:
        """Epochs ended (as Lightning: an epoch that max_steps cut short counts once its end
        hooks ran)."""
        return self.run_state.position.current_epoch

    @property
    def global_step(self) -> int:
        """Optimizer steps taken (all epochs)."""
        return self.run_state.position.global_step

    @property
    def num_training_batches(self) -> int | float:
        return self.run_state.position.epoch_batches

    @property
    def num_training_batches_seen(self) -> int:
        """Training batches the last epoch actually ran."""
        return self.run_state.position.batches_seen

    @property
    def num_eval_batches(self) -> int:
        return self.run_state.num_eval_batches

    @property
    def estimated_stepping_batches(self) -> int | float:
        """Total optimizer steps this fit will take (for schedulers like OneCycleLR)."""
        from trainkit.data import limited_batches

        state = self.run_state
        limits = state.limits
        per_epoch = limited_batches(
            state.given.train_loader, limits.limit_train_batches, "limit_train_batches"
        )
        return limits.total_steps(per_epoch)

    @property
    def should_stop(self) -> bool:
        """Whether the fit stops at its next chance (EarlyStopping and Timer set it)."""
        return self.run_state.stop.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self.run_state.stop.should_stop = bool(value)

    @property
    def fit_done(self) -> bool:
        return self.run_state.fit_done

    @property
    def is_final_epoch(self) -> bool:
        """Whether the epoch now ending is the last one of this fit."""
        return self.run_state.is_final_epoch

    @property
    def preempted(self) -> str | None:
        """The stop signal's name once fit saved a checkpoint and stopped early, else None."""
        return self.run_state.stop.preempted

    @property
    def received_sigterm(self) -> bool:
        """Whether a SIGTERM arrived: held by the stop-signal handlers now, or the one that
        stopped the fit."""
        import signal

        from trainkit.distributed.signals import held_stop_signal

        sigterm = signal.SIGTERM
        return held_stop_signal() == sigterm or self.run_state.stop.preempted == sigterm.name

    @property
    def stalled_attempts(self) -> int:
        """Resumed attempts in a row (this one counted) that trained too few steps: a requeued
        job whose start-up eats its time window (the requeue bound reads it)."""
        from trainkit.distributed.slurm import requeue_min_steps

        state = self.run_state
        return state.stop.stalled_now(state.position.global_step, requeue_min_steps())

    @property
    def ckpt_path(self) -> str | None:
        """The checkpoint the running or last stage loaded; set it to load that checkpoint in
        the stages that follow (until set to None; a stage's own ``ckpt_path`` takes
        precedence)."""
        return self.run_state.ckpt_path

    @ckpt_path.setter
    def ckpt_path(self, path: str | None) -> None:
        self.run_state.ckpt_path = self.run_state.chosen_ckpt_path = path
