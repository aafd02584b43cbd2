"""The ``trainkit`` command: ``trainkit fit|validate|test|predict -c config.yaml``.

``TrainkitCLI`` is ``LightningCLI`` with the command's choices: the config saved into each run
folder is replaced when a run reuses the folder, and ``predict`` saves its predictions.
``trainkit --help`` is answered without importing torch; a subcommand builds only its own parser.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.cli.argv import (
    configured_classes,
    print_help_with_classes,
    top_help,
    typed_device_options,
    wants_help,
)
from trainkit.cli.failures import fail
from trainkit.cli.lightning import ArgsType, LightningCLI
from trainkit.cli.subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.argument_parser import LightningArgumentParser
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

__all__ = [
    "TrainkitCLI",
    "build_parser",
    "configured_classes",
    "fail",
    "finish_rank",
    "instantiate",
    "main",
    "print_help_with_classes",
    "top_help",
    "typed_device_options",
]


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run ``trainkit ARGV`` and return the exit code (0; 2 for bad input;
    1 for an error in the user's code; 75, EX_TEMPFAIL, when a stop signal preempted fit).
    ``sys.exit(main())`` is the console script; called from code, ``main([...])`` runs in this
    process and the ranks it launches run ``python -m trainkit ARGV``."""
    if argv is not None:
        from trainkit.distributed.launchers.rank_command import ranks_run

        with ranks_run([sys.executable, "-m", "trainkit", *argv]):
            return main_of(argv)
    return main_of(argv)


def main_of(argv: list[str] | None) -> int:
    """``main``'s body: the exit code of ``trainkit ARGV`` (None: ``sys.argv``)."""
    try:
        _run(argv)
    except SystemExit as stop:  # fail(), --help, a launcher's ranks' code: its code, returned
        return exit_code(stop.code)
    return 0


def exit_code(code: object) -> int:
    """The process exit code ``SystemExit(code)`` stands for (a message: printed, then 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr, flush=True)
    return 1


def _run(argv: list[str] | None) -> None:
    from trainkit.distributed.signals import PREEMPTED_EXIT_CODE, hold_stop_signals

    fitting = (sys.argv[1:] if argv is None else argv)[:1] == ["fit"]
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's own package next to their config, as python -m
    from trainkit.cli.quiet_warnings import show_each_warning_once

    show_each_warning_once()
    from trainkit.cli.rank_prefix import prefix_rank_output

    prefix_rank_output()  # TRAINKIT_RANK_PREFIX=1: each rank's lines start with [rank R]
    args = sys.argv[1:] if argv is None else argv
    if not wants_help(args) and any(arg in SUBCOMMANDS for arg in args):
        from trainkit.distributed.rank_env import share_threads_in_one_process

        share_threads_in_one_process(os.environ)  # before the user's code sets its own
    # a stop signal is kept for fit to save; once saved, later ones are ignored until the exit
    with hold_stop_signals(until_exit=True) if fitting else contextlib.nullcontext():
        cli = TrainkitCLI(args=argv)
    code = PREEMPTED_EXIT_CODE if getattr(cli.trainer, "preempted", None) else 0
    finish_rank(code, end_process=argv is None)  # main(argv) called from code returns
    if code:
        raise SystemExit(code)


def finish_rank(code: int = 0, end_process: bool = True) -> None:
    """After a run in a rank: sync, destroy the process group, and (``end_process``) leave
    without interpreter finalization (where gloo threads still holding tensors can abort the
    process); else return to the caller."""
    from trainkit.distributed.error_file import (
        exit_without_finalizing,
        process_group_is_up,
        run_clean_exits,
    )

    if not process_group_is_up():
        return
    import torch.distributed as dist

    from trainkit.distributed.rank_board import FINISHING, RankBoard

    RankBoard().mark(FINISHING)
    dist.barrier()
    dist.destroy_process_group()
    run_clean_exits()
    if end_process:
        exit_without_finalizing(code)


class TrainkitCLI(LightningCLI):
    """Parse the config, build model/data/trainer, and run one stage.

    ``TrainkitCLI()`` takes ``model.class_path``; ``TrainkitCLI(MyModel, MyData)`` fixes the classes
    (then ``model:`` holds MyModel's arguments directly), as in a user's own ``main.py``.
    """

    def __init__(
        self,
        model_class: type | None = None,
        datamodule_class: type | None = None,
        args: ArgsType = None,
        run: bool = True,
        **options: Any,
    ) -> None:
        options.setdefault("save_config_kwargs", {"overwrite": True})
        super().__init__(model_class, datamodule_class, args=args, run=run, **options)

    def after_predict(self) -> None:
        """Save what predict returned as ``predictions.pt`` (one file per rank) in the log folder."""
        import torch

        trainer = self.trainer
        name = (
            "predictions.pt"
            if trainer.world_size == 1
            else f"predictions_rank{trainer.global_rank}.pt"
        )
        path = Path(trainer.log_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.result, path)
        if trainer.is_global_zero:
            print(f"predictions saved to {path}", flush=True)


def build_parser(
    prog: str, model_class: type | None, datamodule_class: type | None, subcommand: str
) -> LightningArgumentParser:
    """One subcommand's parser, as ``trainkit`` builds it: trainer, model, data, optimizer,
    lr_scheduler, seed_everything, ckpt_path (it parses ``--section.key`` options directly)."""
    return TrainkitCLI.subcommand_parser(
        subcommand, prog, model_class=model_class, datamodule_class=datamodule_class
    )


def instantiate(
    parser: LightningArgumentParser, config: Namespace
) -> tuple[TrainModule, DataModule | None, Trainer]:
    """Seed, then build model, data module and Trainer from a config ``build_parser``'s parser
    read, as ``trainkit`` does."""
    cli = TrainkitCLI.built_from(parser, config, save_config_kwargs={"overwrite": True})
    return cli.model, cli.datamodule, cli.trainer
