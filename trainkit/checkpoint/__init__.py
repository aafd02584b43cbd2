"""Checkpoints: the files themselves (files: atomic writes, safe loading, sharded folders), what a
checkpoint holds (state), and the plugins the Trainer writes and reads them through (checkpoint_io:
CheckpointIO, TorchCheckpointIO; async_io + snapshot: AsyncCheckpointIO)."""
