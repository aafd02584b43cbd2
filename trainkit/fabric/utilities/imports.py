"""``lightning.fabric.utilities.imports``: checking for optional packages."""

from trainkit.utilities.imports import RequirementCache, compare_version

__all__ = ["RequirementCache", "compare_version"]
