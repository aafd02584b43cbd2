"""Lightning's enums: ``LightningEnum`` (a str enum compared without case) and
``GradClipAlgorithmType`` (what ``gradient_clip_algorithm`` accepts)."""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Literal, Self


class LightningEnum(StrEnum):
    """A str enum that equals its value in any case: ``GradClipAlgorithmType.NORM == "Norm"``."""

    @classmethod
    def from_str(cls, value: str, source: Literal["key", "value", "any"] = "key") -> Self:
        """The member whose name (``source="key"``), value (``"value"``) or either (``"any"``)
        is ``value``, ignoring case."""
        wanted = value.lower()
        if source in ("key", "any"):
            for name, member in cls.__members__.items():
                if name.lower() == wanted:
                    return member
        if source in ("value", "any"):
            for member in cls:
                if member.value.lower() == wanted:
                    return member
        accepted = [member.value for member in cls] if source == "value" else list(cls.__members__)
        raise ValueError(
            f"{cls.__name__}.from_str: {value!r}; expected one of {accepted} (any case)"
        )

    def __eq__(self, other: object) -> bool:
        other = other.value if isinstance(other, Enum) else other
        return isinstance(other, str) and self.value.lower() == other.lower()

    def __hash__(self) -> int:
        return hash(self.value.lower())


class GradClipAlgorithmType(LightningEnum):
    """How ``gradient_clip_val`` clips: by each gradient's ``VALUE`` or by their total ``NORM``."""

    VALUE = "value"
    NORM = "norm"
