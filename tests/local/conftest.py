"""The real packaged model, loaded once per test session for the tests that run in process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.runner.conftest import children  # noqa: F401 (a fixture)
from tracegen.errors import TracegenError
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import DEFAULT_MODEL, find_model


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalBackend]:
    """The default packaged model, two slots of 2048 tokens (skipped when not installed)."""
    try:
        backend = LocalBackend(find_model(DEFAULT_MODEL), context_tokens=2048, slots=2)
    except TracegenError as e:
        pytest.skip(f"the local backend is not installed: {e}")
    asyncio.run(backend.open())
    yield backend
    asyncio.run(backend.aclose())
