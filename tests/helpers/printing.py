"""A model that prints from every rank, for the tests of how ranks' output is told apart."""

from __future__ import annotations

from trainkit.demos.autoencoder import AutoEncoder


class PrintsItsRank(AutoEncoder):
    """Prints ``hello from rank R`` once, at the start of training, on every rank."""

    def on_train_start(self) -> None:
        print(f"hello from rank {self.global_rank}", flush=True)
