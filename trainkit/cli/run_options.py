"""Options of a ``trainkit fit`` run that are not the Trainer's: changes accepted on resume,
and ``--dry_run`` (the Trainer's ``dry_run``, short to type)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainkit.cli.argument_parser import LightningArgumentParser

ALLOW_RESUME_CHANGES = "allow_resume_changes"
DRY_RUN = "dry_run"


def add_run_options(parser: LightningArgumentParser, subcommand: str) -> None:
    """Add the options of ``subcommand`` (only fit has any)."""
    if subcommand != "fit":
        return
    parser.add_argument(
        f"--{ALLOW_RESUME_CHANGES}",
        type=str | None,
        default=None,
        help="Settings to accept when --ckpt_path resumes a run whose model arguments, "
        "optimizer or precision changed: comma-separated keys as the resume names them, or all.",
    )
    parser.add_argument(
        f"--{DRY_RUN}",
        action="store_true",
        help="Start the run as configured, run a few training and validation batches on every "
        "rank, report memory, parameters, step time and the estimated run time, write nothing.",
    )


def apply_run_options(config: Mapping[str, object]) -> None:
    """Hand the options to the run (environment variables reach the ranks trainkit launches)."""
    from trainkit.checkpoint.resume_changes import ALLOW_ENV

    accepted = config.get(ALLOW_RESUME_CHANGES)
    if accepted:
        os.environ[ALLOW_ENV] = str(accepted)
