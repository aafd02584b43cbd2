"""``SaveConfigCallback``: the resolved config written into the run's log folder as a stage
starts (rank 0), so every run folder says how it was made."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback
from trainkit.cli.lightning_config import lightning_loadable, short_class_names
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.argument_parser import LightningArgumentParser
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class ConfigFileExistsError(ConfigError, RuntimeError):
    """The log folder already holds a config from an earlier run (Lightning raises RuntimeError)."""


class SaveConfigCallback(Callback):
    """Save the CLI's config to ``trainer.log_dir/config_filename`` when a stage starts.

    A validate/test/predict run that lands in a fit's folder (trainkit puts an evaluation of a
    checkpoint beside its fit) writes ``config_<stage>.yaml`` and keeps the fit's file.
    Subclass and override ``save_config`` to also send the config elsewhere (rank 0 only).
    """

    def __init__(
        self,
        parser: LightningArgumentParser,
        config: Namespace,
        config_filename: str = "config.yaml",
        overwrite: bool = False,
        multifile: bool = False,
        save_to_log_dir: bool = True,
    ) -> None:
        """Args:
        parser: The parser that read the config (it writes it back).
        config: The parsed config to save.
        config_filename: The file name in the log folder.
        overwrite: Replace a config file an earlier run left there (else fit stops with an error).
        multifile: Keep the structure of several config files.
        save_to_log_dir: Write the file; False only makes sense with a save_config override.
        """
        self.parser = parser
        self.config = config
        self.config_filename = config_filename
        self.overwrite = overwrite
        self.multifile = multifile
        self.save_to_log_dir = save_to_log_dir
        self.already_saved = False
        if not save_to_log_dir and type(self).save_config is SaveConfigCallback.save_config:
            raise ConfigError(
                "save_to_log_dir",
                save_to_log_dir,
                "True unless a SaveConfigCallback subclass overrides save_config",
                "subclass SaveConfigCallback and implement save_config, or leave it True",
            )

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        """Write the config once per run (rank 0), then call ``save_config``."""
        if self.already_saved:
            return
        if self.save_to_log_dir:
            self._write(trainer, stage)
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    def _write(self, trainer: Trainer, stage: str) -> None:
        path = Path(trainer.log_dir) / self.config_filename
        exists = trainer.strategy.broadcast(path.is_file() if trainer.is_global_zero else False)
        overwrite = self.overwrite
        if exists and stage != "fit":  # an evaluation beside its fit keeps the fit's config
            path = path.with_name(f"{path.stem}_{stage}{path.suffix}")
            overwrite = True
        elif exists and not overwrite:
            raise ConfigFileExistsError(
                "config file",
                str(path),
                "a log folder without a config from an earlier run (SaveConfigCallback does "
                "not overwrite it)",
                "delete it, log into a new version, or pass save_config_kwargs="
                "{'overwrite': True} (save_config_callback=None saves none)",
            )
        if trainer.is_global_zero:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a file a LightningCLI reads too (and trainkit reads back to the same run)
            config = lightning_loadable(self.parser, self.config)
            if self.multifile:
                self.parser.save(
                    config, str(path), skip_unset=False, overwrite=overwrite, multifile=True
                )
            else:
                text = self.parser.dump(config, skip_unset=False)
                path.write_text(short_class_names(text))

    def save_config(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        """Override to save the config somewhere else too (a logger, a tracker); rank 0 only,
        so no collective calls here."""
