"""Signals, kill -9 and a full disk leave valid files, and running again finishes the job."""

from __future__ import annotations

import random
import resource
import signal
import time

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import keys, read, solver, spawn, wait_for_records, write_problems

pytestmark = pytest.mark.slow  # whole runs in a child process, interrupted by signals


def resume_line(stderr: str) -> str:
    lines = stderr.splitlines()
    return lines[lines.index(next(x for x in lines if "to resume, run:" in x)) + 1].strip()


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_lets_episodes_in_flight_finish_and_says_how_to_resume(
    sig, status, workspace, children
):
    with FakeOllama(latency_s=0.4) as server:
        server.set_responder(solver)
        args = workspace.args(server, "--concurrency", "2", "--rejects", str(workspace.rejects))
        proc = spawn(args)
        children.append(proc)
        wait_for_records(workspace.out, 2, proc)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == status, stderr
        assert "Traceback" not in stderr
        started = sum(1 for path in server.paths() if path == "/api/chat")
        done = keys(workspace.out, workspace.rejects)
        assert len(done) == started < 12
        command = resume_line(stderr)
        assert command.startswith("tracegen run --mode markers")
        assert "--rejects" in command

        again = spawn(args)
        children.append(again)
        again.communicate(timeout=60)
        assert again.returncode == 0
    assert sorted(keys(workspace.out, workspace.rejects)) == sorted((f"p{i}", 0) for i in range(12))


def test_a_second_interrupt_exits_at_once_with_valid_files(workspace, children):
    with FakeOllama(latency_s=60) as server:
        server.set_responder(solver)
        proc = spawn(workspace.args(server, "--concurrency", "2", "--overwrite"))
        children.append(proc)
        deadline = time.monotonic() + 30
        while server.in_flight < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr
        assert str(workspace.out) in resume_line(stderr)
    assert "--overwrite" not in resume_line(stderr)
    assert read(workspace.out) == []


def test_kill_9_at_random_moments_then_resume_gives_each_episode_exactly_once(tmp_path, children):
    problems = write_problems(tmp_path / "problems.jsonl", 25)
    out, rejects = tmp_path / "traces.jsonl", tmp_path / "rejects.jsonl"
    args = [
        "run",
        "--mode",
        "markers",
        "--model",
        "test-model",
        "--problems",
        str(problems),
        "--num-samples",
        "2",
        "--only-ideal",
        "--rejects",
        str(rejects),
        "-o",
        str(out),
        "--sandbox",
        "rlimit",
        "--concurrency",
        "4",
    ]
    moments = [random.uniform(0.0, 0.4) for _ in range(3)]
    state = tmp_path / "traces.jsonl.state"
    with FakeOllama(latency_s=0.05) as server:
        server.set_responder(solver)
        for round, moment in enumerate(moments):
            proc = spawn([*args, "--host", server.url])
            children.append(proc)
            wait_for_records(state, 2 + 10 * round, proc)
            time.sleep(moment)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        final = spawn([*args, "--host", server.url])
        children.append(final)
        _, stderr = final.communicate(timeout=120)
        assert final.returncode == 0, stderr
    records = keys(out, rejects)
    assert len(records) == 50, f"killed {moments} s after writing began"
    assert len(set(records)) == 50, f"killed {moments} s after writing began"


def test_a_full_disk_is_one_line_exit_2_and_resume_finishes(workspace, children):
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, resource.RLIM_INFINITY))

    with FakeOllama() as server:
        server.set_responder(solver)
        proc = spawn(workspace.args(server, "--concurrency", "1"), preexec_fn=small_files)
        children.append(proc)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 2, stderr
        (line,) = stderr.strip().splitlines()
        assert line.startswith("tracegen: error: ") and "cannot write" in line
        partial = keys(workspace.out)
        assert 0 < len(partial) < 12

        again = spawn(workspace.args(server))
        children.append(again)
        _, stderr = again.communicate(timeout=60)
        assert again.returncode == 0, stderr
    assert sorted(keys(workspace.out)) == sorted((f"p{i}", 0) for i in range(12))
