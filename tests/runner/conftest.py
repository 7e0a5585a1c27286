"""Runner fixtures: a workspace with 12 problems, the scripted model, the CLI in process."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fake_ollama import FakeOllama
from tests.support.runs import Workspace, solver, write_problems
from tracegen.cli import app


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(
        dir=tmp_path,
        problems=write_problems(tmp_path / "problems.jsonl", 12),
        out=tmp_path / "traces.jsonl",
        rejects=tmp_path / "rejects.jsonl",
    )


@pytest.fixture
def model(fake_ollama: FakeOllama) -> FakeOllama:
    """The loopback server answering with `solver`."""
    fake_ollama.set_responder(solver)
    return fake_ollama


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """Run ``tracegen ARGS`` in-process; the environment cannot leak settings in."""
    for name in list(os.environ):
        if name.startswith(("TRACEGEN_", "OLLAMA_")):
            monkeypatch.delenv(name)
    runner = CliRunner()

    def invoke(args: list[str]):
        return runner.invoke(app, args, catch_exceptions=False)

    return invoke


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test started; any still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
