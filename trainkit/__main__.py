"""``python -m trainkit`` runs the CLI."""

import sys

from trainkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
