"""``cli_lightning_logo``: the banner Lightning's example scripts print before they start."""

from __future__ import annotations

LIGHTNING_LOGO = r"""
  _             _       _    _ _
 | |_ _ __ __ _(_)_ __ | | _(_) |_
 | __| '__/ _` | | '_ \| |/ / | __|
 | |_| | | (_| | | | | |   <| | |_
  \__|_|  \__,_|_|_| |_|_|\_\_|\__|
"""


def cli_lightning_logo() -> None:
    """Print trainkit's banner (Lightning's name, so its example scripts run as written)."""
    print()
    print("\033[0;35m" + LIGHTNING_LOGO + "\033[0m")
    print()
