"""Trace files for the output commands, built from `tests.traces_factory`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.traces_factory import all_shapes
from tracegen.jsonl import JsonlWriter
from tracegen.schema import Trace


def write_traces(path: Path, traces: list[Trace]) -> Path:
    with JsonlWriter(path) as writer:
        for trace in traces:
            writer.write(trace)
    return path


@pytest.fixture
def traces() -> list[Trace]:
    """Two copies of every mode shape: successes, partial scores, failed episodes."""
    return all_shapes(copies=2)


@pytest.fixture
def trace_file(tmp_path: Path, traces: list[Trace]) -> Path:
    return write_traces(tmp_path / "traces.jsonl", traces)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "NO_COLOR": None, "FORCE_COLOR": None})
