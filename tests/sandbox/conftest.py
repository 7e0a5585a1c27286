"""A sandbox for every isolation (only tracegen's own in the fast tier), with short limits,
one per test (`sandbox`) or per module (`judged`); none may leave a process behind."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.sandboxes import EACH_ISOLATION, LIMITS, sandbox_processes
from tracegen.sandbox import Sandbox


@pytest.fixture(params=EACH_ISOLATION)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EACH_ISOLATION)
async def judged(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []
