"""A sandbox for every isolation (only tracegen's own in the fast tier), with short limits;
none may leave a process behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.sandboxes import EACH_ISOLATION, LIMITS, sandbox_processes
from tracegen.sandbox import Sandbox


@pytest.fixture(params=EACH_ISOLATION)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []
