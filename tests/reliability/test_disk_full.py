"""A full disk stops the run with one line and no partial record; once space is back, the
same command finishes the job."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Reply
from tests.support.runs import tracegen
from tests.support.scenarios import (
    builtin,
    episodes,
    error_line,
    markers_reply,
    problem_of,
    read_jsonl,
    run_args,
)
from tests.support.traces import all_shapes
from tracegen.jsonl import dumps

pytestmark = pytest.mark.slow  # whole runs and conversions in a child process on a full disk

FILE_SIZE_LIMIT = 40_000
"""Bytes a file of the run may grow to: room for a few traces, like an almost full disk."""


def almost_full_disk(limit: int = FILE_SIZE_LIMIT) -> Callable[[], None]:
    """What a child runs first to get files that cannot grow past ``limit`` bytes."""

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return limit_file_size


@pytest.mark.parametrize("fills", ["traces.jsonl", "rejects.jsonl"])
def test_a_full_disk_is_one_line_no_partial_record_and_resume_finishes(
    tmp_path: Path, fills: str
) -> None:
    problems = builtin(12)

    def model(path: str, body: dict[str, Any]) -> Reply:
        problem = problem_of(body, problems)
        if fills == "rejects.jsonl":
            return markers_reply(f"def {problem.entry_point}(*args):\n    return None")
        assert problem.reference_solution is not None
        return markers_reply(problem.reference_solution)

    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    with FakeOllama() as server:
        server.set_responder(model)
        args = run_args(
            server.url, out, "--limit", "12", "--only-success", "--rejects", str(rejects), "--quiet"
        )
        full = tracegen(args, preexec_fn=almost_full_disk())
        before = episodes(read_jsonl(out), read_jsonl(rejects))
        size = (tmp_path / fills).stat().st_size
        again = tracegen(args)
    assert full.returncode == 2, full.stderr
    line = error_line(full.stderr)
    assert line.startswith(f"tracegen: error: {tmp_path / fills}: cannot write: "), line
    assert 0 < len(before) < 12, "the limit should stop the run part-way"
    assert size <= FILE_SIZE_LIMIT

    assert again.returncode == 0, again.stderr
    accepted, rejected = read_jsonl(out), read_jsonl(rejects)
    assert sorted(episodes(accepted, rejected)) == sorted((p.id, 0) for p in problems)
    assert len(read_jsonl(tmp_path / "traces.jsonl.state")) == 1 + 12


@pytest.mark.parametrize("output", ["-o", "--parquet", "--to-hf"])
def test_a_full_disk_during_convert_leaves_no_half_written_output(
    tmp_path: Path, output: str
) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_bytes(b"".join(dumps(t) for t in all_shapes(copies=40)))
    target = tmp_path / "converted"
    args = ["convert", str(traces), "--chat-format", output, str(target)]
    full = tracegen(args, preexec_fn=almost_full_disk(4_000))
    assert full.returncode == 2, full.stderr
    assert "cannot write" in error_line(full.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces.jsonl"]
    again = tracegen(args)
    assert again.returncode == 0, again.stderr
    assert target.exists()
