"""Lightning's ``utilities.enums``: ``LightningEnum`` and ``GradClipAlgorithmType``, defined in
``trainkit/common/enums.py``."""

from trainkit.common.enums import GradClipAlgorithmType, LightningEnum

__all__ = ["GradClipAlgorithmType", "LightningEnum"]
