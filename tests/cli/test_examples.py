"""The shipped examples keep working."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_ollama import Reply
from tracegen.problems import load_problems

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_library_example_checks_references_runs_an_episode_generates_and_summarises(
    fake_ollama, tmp_path
):
    problems = load_problems("builtin", limit=3)

    def answer(path: str, body: dict) -> Reply:
        question = body["messages"][-1]["content"]
        [problem] = [p for p in problems if p.prompt in question]
        return Reply(
            content=f"<think>Known approach.</think>\n<code>\n{problem.reference_solution}\n</code>"
        )

    fake_ollama.set_responder(answer)
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "library.py"),
            "--host",
            fake_ollama.url,
            "--model",
            "test-model",
            "--output",
            str(tmp_path / "t.jsonl"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split(":")[1].split()[0] for line in lines[:3]] == ["ok", "ok", "ok"]
    assert lines[3] == f"episode {problems[0].id}: success True"
    assert lines[-1] == "traces: 3, successful: 3"
