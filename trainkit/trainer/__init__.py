"""The Trainer and what it builds around a stage: argument checks, setup, the startup summary."""

from trainkit.seed import seed_everything
from trainkit.trainer.trainer import Trainer

__all__ = ["Trainer", "seed_everything"]
