"""The ground floor: errors aside (``trainkit/errors.py``), what every layer may import because it
imports nothing of trainkit: Lightning's type aliases (``types``), enums, warnings, whether a hook
is overridden (``hooks``), and the lazy exports of the packages (``lazy``).
``tests/unit/test_architecture.py`` holds the rule."""
