"""A sandbox for every isolation, with short limits; none may leave a process behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.sandboxes import ISOLATIONS, LIMITS, sandbox_processes
from tracegen.sandbox import Sandbox


@pytest.fixture(params=ISOLATIONS)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []
