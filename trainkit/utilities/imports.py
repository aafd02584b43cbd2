"""Checking for optional packages: lightning_utilities' helpers, as Lightning exposes them."""

from __future__ import annotations

from lightning_utilities.core.imports import (
    RequirementCache,
    compare_version,
    module_available,
    package_available,
)

__all__ = ["RequirementCache", "compare_version", "module_available", "package_available"]
