"""Checkpoints: atomic files and safe loading (io), what a checkpoint holds (state)."""
