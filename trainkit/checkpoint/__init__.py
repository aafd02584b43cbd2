"""Checkpoints: atomic files and safe loading (io), what a checkpoint holds (state), how files are
written (checkpoint_io: CheckpointIO, TorchCheckpointIO; async_io + snapshot: AsyncCheckpointIO)."""
