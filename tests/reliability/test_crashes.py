"""kill -9 at random moments, then the same command again: every episode exactly once."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tests.support.runs import child_env, command, tracegen
from tests.support.scenarios import (
    builtin,
    descendants,
    episodes,
    error_line,
    markers_reply,
    problem_of,
    read_jsonl,
    reference_solver,
    run_args,
    serving,
    wait_until_gone,
)

pytestmark = pytest.mark.slow  # whole runs in a child process, killed and started again

KILLS = 5
SAMPLES = 2


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while lines(path) < count:
        assert proc.poll() is None, f"the run ended before {path} had {count} lines"
        assert time.monotonic() < deadline, f"{path} never reached {count} lines"
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_five_kill_9_at_random_moments_lose_and_duplicate_nothing(
    tmp_path: Path, children: list[subprocess.Popen[bytes]], kind: str
) -> None:
    problems = builtin(25)
    wrong = {p.id for p in problems[::3]}

    def model(path: str, body: dict[str, Any]) -> Reply:
        problem = problem_of(body, problems)
        if problem.id in wrong:
            return markers_reply(f"def {problem.entry_point}(*args, **kwargs):\n    return None")
        assert problem.reference_solution is not None
        return markers_reply(problem.reference_solution)

    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    state = tmp_path / "traces.jsonl.state"
    rng = random.Random(20240611)
    moments = [rng.uniform(0.0, 0.5) for _ in range(KILLS)]
    with serving(kind, latency_s=0.2) as (server, host):
        server.set_responder(model)
        server.fail_randomly(0.1, [Fault("status", 503), Fault("drop")], seed=3)
        args = run_args(
            host,
            out,
            "--limit",
            "25",
            "--num-samples",
            str(SAMPLES),
            "--concurrency",
            "2",
            "--only-success",
            "--rejects",
            str(rejects),
        )
        sandboxes: set[tuple[int, str]] = set()
        for moment in moments:
            proc = subprocess.Popen(
                command(args),
                env=child_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            children.append(proc)
            wait_for_lines(state, lines(state) + 2, proc)
            time.sleep(moment)
            assert proc.poll() is None, "the run finished before it could be killed"
            sandbox = descendants(proc.pid)
            assert sandbox, "a run that executed code has a sandbox"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            sandboxes |= sandbox
        killed_at = lines(state) - 1
        final = tracegen(args)
    assert final.returncode == 0, final.stderr

    accepted, rejected = read_jsonl(out), read_jsonl(rejects)
    attempted = read_jsonl(state)[1:]
    expected = sorted((p.id, s) for p in problems for s in range(SAMPLES))
    figure = f"{KILLS} kills at {[round(m, 2) for m in moments]} s, {killed_at} recorded before"
    assert sorted(episodes(accepted, rejected)) == expected, figure
    assert len({r["id"] for r in accepted + rejected}) == len(expected), figure
    assert all(r["success"] for r in accepted) and not any(r["success"] for r in rejected)
    assert {p for p, _ in episodes(rejected)} == wrong
    assert len(set(episodes(attempted))) == len(attempted) <= len(expected), figure
    assert 0 < killed_at < len(expected), figure
    assert wait_until_gone(sandboxes) == set(), "a sandbox outlived its killed run"


def test_the_same_command_started_twice_at_once_runs_each_episode_once(
    tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    problems = builtin(8)
    out = tmp_path / "traces.jsonl"
    with FakeOllama(latency_s=0.3) as server:
        server.set_responder(reference_solver(problems))
        args = run_args(server.url, out, "--limit", "8", "--concurrency", "2")
        first = subprocess.Popen(command(args), env=child_env(), stdout=subprocess.DEVNULL)
        children.append(first)
        wait_for_lines(tmp_path / "traces.jsonl.state", 1, first)
        second = tracegen(args)
        first.wait(timeout=120)
    assert first.returncode == 0
    assert second.returncode == 2, second.stderr
    assert str(out) in error_line(second.stderr)
    assert sorted(episodes(read_jsonl(out))) == sorted((p.id, 0) for p in problems)


def test_a_run_into_folders_that_do_not_exist_yet_creates_them(tmp_path: Path) -> None:
    problems = builtin(2)
    out, rejects = tmp_path / "new" / "traces.jsonl", tmp_path / "other" / "rejects.jsonl"
    with FakeOllama() as server:
        server.set_responder(reference_solver(problems))
        done = tracegen(run_args(server.url, out, "--limit", "2", "--rejects", str(rejects)))
    assert done.returncode == 0, done.stderr
    assert sorted(episodes(read_jsonl(out))) == sorted((p.id, 0) for p in problems)
