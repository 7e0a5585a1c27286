"""The TRL environments of a test module share the process's sandboxes (as a trainer's do):
closed after the module, so that no sandbox process outlives it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sandboxes import sandbox_processes


@pytest.fixture(autouse=True, scope="module")
def _sandboxes_closed_after_the_module() -> Iterator[None]:
    yield
    from tracegen.trl import close_sandboxes

    close_sandboxes()
    assert sandbox_processes() == []
