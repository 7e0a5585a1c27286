"""Fixtures shared by every test area; each area keeps its own in its subfolder's conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_ollama import FakeOllama


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    """A loopback Ollama server (default model ``test-model``), started and stopped per test."""
    with FakeOllama() as server:
        yield server
