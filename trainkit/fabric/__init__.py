"""Lightning Fabric's import paths that Trainer programs use: ``lightning.fabric.utilities.X``
and ``lightning_fabric.utilities.X`` are ``trainkit.fabric.utilities.X`` (docs/porting.md).
trainkit has no Fabric itself: only these utilities are here."""
