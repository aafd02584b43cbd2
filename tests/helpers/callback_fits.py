"""A quiet CPU fit of the regression model with the callbacks under test (no bar, no logger;
checkpoints only when a ``root`` folder is given)."""

from __future__ import annotations

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer


def fit(*callbacks, model=None, max_epochs=4, ckpt_path=None, root=None, **options):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=root is not None,
        default_root_dir=None if root is None else str(root),
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
        **options,
    )
    model = model or Regression()
    trainer.fit(model, regression_loader(), ckpt_path=ckpt_path)
    return trainer
