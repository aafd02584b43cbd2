"""``lightning.fabric.utilities.rank_zero``: doing things on global rank 0 only, the same objects
as ``trainkit.utilities.rank_zero``'s (one ``rank_zero_only``)."""

from trainkit.utilities.rank_zero import *  # noqa: F403
from trainkit.utilities.rank_zero import __all__ as __all__
