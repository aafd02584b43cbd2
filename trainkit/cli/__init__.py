"""The ``trainkit`` command line: ``main`` (the console script) and ``TrainkitCLI``."""

from trainkit.cli.command import TrainkitCLI, main

__all__ = ["TrainkitCLI", "main"]
