"""A launched rank's uncaught exception, written where its launcher reads it."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from trainkit.distributed.signals import ERROR_FILE_ENV


def install_error_file_hook() -> None:
    """In a launched rank: write an uncaught exception to the launcher's error file."""
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    rank = os.environ.get("RANK", "?")

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        record = json.dumps({"rank": rank, "time": time.time(), "traceback": text})
        partial = f"{path}.partial"
        Path(partial).write_text(record)
        os.replace(partial, path)  # the launcher never reads half a record

    sys.excepthook = hook
