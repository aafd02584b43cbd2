"""Checking for optional packages: lightning_utilities' helpers, as Lightning exposes them."""

from __future__ import annotations

from lightning_utilities.core.imports import (
    RequirementCache,
    compare_version,
    module_available,
    package_available,
)

__all__ = [
    "_OMEGACONF_AVAILABLE",
    "_RICH_AVAILABLE",
    "_TORCHVISION_AVAILABLE",
    "RequirementCache",
    "compare_version",
    "module_available",
    "package_available",
]

# Lightning's flags, read by its example scripts (``if _TORCHVISION_AVAILABLE: ...``)
_TORCHVISION_AVAILABLE = RequirementCache("torchvision")
_RICH_AVAILABLE = RequirementCache("rich>=10.2.2")
_OMEGACONF_AVAILABLE = package_available("omegaconf")
