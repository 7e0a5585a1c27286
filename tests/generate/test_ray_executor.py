"""`tracegen run --executor ray` against the loopback server, on a Ray instance of this machine:
the same episodes as a local run, per-host limits held cluster-wide, nothing lost or written
twice when a node goes away or the driver is killed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import Workspace, child_env, keys, read, solver, spawn, tracegen


def ray_args(workspace: Workspace, hosts: list[FakeOllama], cluster: Any, *extra: str) -> list[str]:
    args = workspace.args(hosts[0], "--rejects", str(workspace.rejects), *extra)
    for server in hosts[1:]:
        args += ["--host", server.url]
    return [*args, "--executor", "ray", "--ray-address", cluster.address]


def chats(server: FakeOllama) -> list[dict[str, str]]:
    return [headers for path, _, headers in server.requests if path == "/api/chat"]


def once_each(workspace: Workspace, count: int) -> None:
    found = Counter(keys(workspace.out, workspace.rejects))
    assert sorted(found) == sorted((f"p{i}", s) for i in range(12) for s in range(count // 12))
    assert set(found.values()) == {1}


@pytest.mark.slow
def test_a_ray_run_writes_what_a_local_run_writes_within_each_hosts_limit(
    workspace, model, ray_cluster, tmp_path
):
    local = Workspace(tmp_path, workspace.problems, tmp_path / "local.jsonl", tmp_path / "lr.jsonl")
    result = tracegen(local.args(model, "--rejects", str(local.rejects), "--num-samples", "2"))
    assert result.returncode == 0, result.stderr
    with FakeOllama(latency_s=0.05) as a, FakeOllama(latency_s=0.05) as b:
        for server in (a, b):
            server.set_responder(solver)
        args = ray_args(workspace, [a, b], ray_cluster, "--num-samples", "2", "--concurrency", "2")
        result = tracegen(args)
        assert result.returncode == 0, result.stderr
        assert 1 <= a.max_in_flight <= 2 and 1 <= b.max_in_flight <= 2  # --concurrency holds
        sessions = [h.get("x-session-id") for h in chats(a) + chats(b)]
    ids = sorted(r["id"] for r in read(workspace.out) + read(workspace.rejects))
    assert ids == sorted(r["id"] for r in read(local.out) + read(local.rejects))
    assert sorted(sessions) == ids  # one request per episode, tagged with its trace id
    assert "Ray actors" in result.stdout


@pytest.mark.slow
def test_removing_a_node_mid_run_loses_and_duplicates_nothing(workspace, ray_cluster, children):
    nodes = [ray_cluster.add_node(num_cpus=1, resources={"tracegen_sandbox": 1}) for _ in "ab"]
    try:
        with FakeOllama(latency_s=0.4) as server:
            server.set_responder(solver)
            proc = spawn(ray_args(workspace, [server], ray_cluster, "--num-samples", "4"))
            children.append(proc)
            deadline = time.monotonic() + 120
            while len(read_whole(workspace.out) + read_whole(workspace.rejects)) < 6:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.1)
            ray_cluster.remove_node(nodes.pop(), allow_graceful=False)
            out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        once_each(workspace, 48)
        assert re.search(r"2 started, 1 died; [1-9]\d* episodes lost", out), out
        assert not RAY_DUMPS.search(out + err), out + err  # they stay in Ray's logs
    finally:
        for node in nodes:
            ray_cluster.remove_node(node)


@pytest.mark.slow
def test_interrupted_or_killed_the_ray_driver_resumes_with_the_same_command(
    workspace, ray_cluster, children
):
    with FakeOllama(latency_s=0.2) as server:
        server.set_responder(solver)
        args = ray_args(workspace, [server], ray_cluster, "--num-samples", "3")
        for sig, status in ((signal.SIGINT, 130), (signal.SIGKILL, -9)):
            proc = spawn(args)
            children.append(proc)
            seen = len(read_whole(workspace.out) + read_whole(workspace.rejects))
            deadline = time.monotonic() + 120
            while len(read_whole(workspace.out) + read_whole(workspace.rejects)) < seen + 3:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.05)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == status, err
        result = tracegen(args)
    assert result.returncode == 0, result.stderr
    once_each(workspace, 36)


RAY_DUMPS = re.compile(r"\(raylet\)|has been marked dead|A worker died|Unhandled error")
"""What Ray's driver prints of dead nodes and workers, unless tracegen keeps it in Ray's logs."""


def episode_actors() -> list[int]:
    """The pids of the tracegen actors of this session's Ray instance (never another's: the
    machine may run other Ray instances)."""
    ours = f"RAY_TMPDIR={os.environ['RAY_TMPDIR']}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            actor = (entry / "cmdline").read_bytes().startswith(b"ray::EpisodeActor")
            if actor and ours in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_stopped_actor_is_replaced_and_its_episodes_run_elsewhere_once(
    workspace, ray_cluster, children
):
    nodes = [ray_cluster.add_node(num_cpus=1, resources={"tracegen_sandbox": 1}) for _ in "ab"]
    stopped: list[int] = []
    config = workspace.dir / "deadline.toml"
    config.write_text("request_timeout_s = 2.0\n")  # deadline: 2 s + --exec-timeout 1 s
    try:
        with FakeOllama(latency_s=0.3) as server:
            server.set_responder(solver)
            args = ray_args(workspace, [server], ray_cluster, "--num-samples", "3")
            proc = spawn([*args, "--exec-timeout", "1", "--config", str(config)])
            children.append(proc)
            deadline = time.monotonic() + 120
            while len(read_whole(workspace.out) + read_whole(workspace.rejects)) < 4:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.1)
            pid = episode_actors()[0]
            os.kill(pid, signal.SIGSTOP)  # alive to its raylet, deaf to everyone
            stopped.append(pid)
            out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        once_each(workspace, 36)
        assert re.search(r"[2-9] started, 1 died \(1 hung\)", out), out
        assert re.search(r"actor #\d\s+│ \S+ · node \w{8} · 1 CPUs · started", out), out
        assert re.search(r"│ \S+ · \d+ episodes, hung\s+│", out), out  # told apart from the rest
        assert not RAY_DUMPS.search(out + err), out + err
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        for node in nodes:
            ray_cluster.remove_node(node)


def read_whole(path: Path) -> list[bytes]:
    """The whole lines of a file being written."""
    if not path.exists():
        return []
    return path.read_bytes().split(b"\n")[:-1]


def test_executor_ray_without_ray_installed_is_one_line_naming_the_extra(
    workspace, model, tmp_path
):
    fake = tmp_path / "no-ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    env = child_env()
    env["PYTHONPATH"] = f"{fake.parent}:{env['PYTHONPATH']}"
    result = tracegen(workspace.args(model, "--executor", "ray"), env=env)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--executor ray needs Ray: pip install 'tracegen[ray]'" in line
