"""A Hydra app with `_target_` configs, like Lightning's Hydra templates: the model, data,
callbacks and Trainer are instantiated from YAML by hydra.utils.instantiate.
Usage: hydra_app.py [overrides] (e.g. trainer.devices=2)"""

import hydra
from omegaconf import DictConfig

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result


@hydra.main(version_base="1.3", config_path="hydra_configs", config_name="train")
def main(config: DictConfig) -> None:
    pl.seed_everything(config.seed)
    data = hydra.utils.instantiate(config.data)
    model = hydra.utils.instantiate(config.model)
    callbacks = [hydra.utils.instantiate(c) for c in config.get("callbacks", {}).values()]
    logger = hydra.utils.instantiate(config.logger)  # a ListConfig of loggers
    trainer = hydra.utils.instantiate(config.trainer, callbacks=callbacks, logger=logger)
    trainer.fit(model, datamodule=data)
    output_dir = hydra.core.hydra_config.HydraConfig.get().runtime.output_dir
    write_result(trainer, output_dir=output_dir, world=trainer.world_size)


if __name__ == "__main__":
    main()
