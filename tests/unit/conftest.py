"""The unit tier runs in this process: a unit test that starts an interpreter, a rank, a
daemon or any program fails, naming it; such a test belongs in tests/integration/. A fork (a
DataLoader's workers) runs this interpreter on and is not counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.spawn_census import is_fork, watching


@pytest.fixture(autouse=True)
def starts_no_process() -> Iterator[None]:
    with watching() as seen:
        yield
    started = [text for text in seen if not is_fork(text)]
    assert not started, (
        f"a unit test started a process: {started[0]} (move it to tests/integration/)"
    )
