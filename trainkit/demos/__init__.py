"""Runnable examples on synthetic data: nothing to download."""
