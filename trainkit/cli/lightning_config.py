"""The config file ``SaveConfigCallback`` writes, shaped so that Lightning's CLI reads it too
(a ported program's saved run loads under Lightning) and trainkit reads it back to the same run:
trainkit's own settings left out while they hold their defaults, trainkit's loggers and
callbacks named by class name alone, and a logger's ``save_dir`` written out (in the config the
checkpoints record too, so a resume from either sees no change)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.argument_parser import LightningArgumentParser

# the Trainer arguments Lightning's Trainer does not take (tests/integration/compat/test_saved_config.py
# compares this with both signatures)
TRAINER_ONLY = (
    "compile",
    "gpus",
    "checkpoint_weights_only",
    "lr_scaling",
    "reference_batch_size",
    "batch_size_mode",
    "max_restarts",
    "dry_run",
    "nonfinite_loss",
)
# every key of a saved config that a LightningCLI does not have (fit's run options too)
TRAINKIT_ONLY = ("allow_resume_changes", "dry_run", *(f"trainer.{key}" for key in TRAINER_ONLY))
# the Trainer's sections whose classes both CLIs find by class name
CLASS_SECTIONS = ("logger", "callbacks")


def lightning_loadable(parser: LightningArgumentParser, config: Namespace) -> Namespace:
    """``config`` without the ``TRAINKIT_ONLY`` keys that hold their default."""
    defaults = parser.get_defaults()
    kept = config.clone()
    for key in TRAINKIT_ONLY:
        if key in kept and key in defaults and kept[key] == defaults[key]:
            del kept[key]
    return kept


def write_logger_save_dirs(config: Namespace, root_dir: str) -> None:
    """A logger left to the Trainer's folder (``save_dir: null``, which Lightning refuses)
    gets it written out in ``config``: the saved file and checkpoints record where it logs."""
    loggers = config.get("trainer.logger")
    for item in loggers if isinstance(loggers, list) else [loggers]:
        init_args = getattr(item, "init_args", None)
        if init_args is not None and "save_dir" in init_args and init_args.save_dir is None:
            init_args.save_dir = root_dir


def short_class_names(text: str) -> str:
    """The dumped config ``text`` with the Trainer's loggers and callbacks of trainkit's
    (``class_path: trainkit.CSVLogger``) named by class name (``CSVLogger``): Lightning's CLI
    finds its class of that name, trainkit's its own. The leading comment lines are kept."""
    import yaml

    lines = text.splitlines(keepends=True)
    header = "".join(line for line in lines if line.startswith("#"))
    data = yaml.safe_load(text)
    trainer = data.get("trainer") if isinstance(data, dict) else None
    if not isinstance(trainer, dict):
        return text
    changed = False
    for section in CLASS_SECTIONS:
        value = trainer.get(section)
        for item in value if isinstance(value, list) else [value]:
            changed |= _shorten(item)
    if not changed:
        return text
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return header + body


def _shorten(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    class_path = item.get("class_path")
    if not isinstance(class_path, str) or not class_path.startswith("trainkit."):
        return False
    item["class_path"] = class_path.rpartition(".")[2]
    return True
