"""``python -m trainkit`` runs the CLI."""

from trainkit.cli import main

if __name__ == "__main__":
    main()
