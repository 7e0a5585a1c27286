"""OLLAMA_API_KEY reaches the server in the Authorization header and nowhere else: not the
files, the logs, the error messages, nor the generated code's environment."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.fake_ollama import FakeOllama, Fault, Reply
from tests.support.runs import child_env, tracegen
from tests.support.scenarios import (
    TRACEBACK,
    error_line,
    markers_reply,
    read_jsonl,
    run_args,
    square_task,
    unused_port,
    write_problems,
)

pytestmark = pytest.mark.slow  # whole runs in a child process

SPY = """import os
found = []
try:
    pids = os.listdir('/proc')
except OSError as e:  # the builtin isolation refuses /proc itself
    pids, found = [], [f'no /proc: {e}']
for pid in pids:
    for name in ('environ', 'cmdline'):
        try:
            data = open(f'/proc/{pid}/{name}', 'rb').read()
        except OSError:
            continue
        if b'OLLAMA' in data:
            found.append(data.decode(errors='replace'))
print(dict(os.environ))
print(found)

def square(x):
    return repr(dict(os.environ)) + repr(found)
"""
"""Generated code looking for the key: its own environment and every process it can see (under
the builtin isolation, which refuses ``/proc`` itself, its environment only)."""
RIGHT = "def square(x):\n    return x * x\n"
EXPECTED = {
    "rejected key": "OLLAMA_API_KEY was rejected",
    "unreachable host": "is `ollama serve` running?",
}


@pytest.fixture
def canary() -> str:
    return f"sk-canary-{uuid.uuid4().hex}"


def feedback(messages: list[dict[str, Any]]) -> list[str]:
    """What tracegen told the model about its program's failures."""
    return [m["content"] for m in messages if m["role"] == "user" and "<error>" in m["content"]]


def spy_then_fix(path: str, body: dict[str, Any]) -> Reply:
    return markers_reply(RIGHT if feedback(body["messages"]) else SPY)


def spy_run(host: str, tmp_path: Path, *extra: str) -> list[str]:
    problems = write_problems(tmp_path / "tasks.jsonl", [square_task("spy")])
    rejects = tmp_path / "rejects.jsonl"
    return run_args(
        host,
        tmp_path / "traces.jsonl",
        "--problems",
        str(problems),
        "--rejects",
        str(rejects),
        *extra,
        mode="tool-feedback",
    )


def test_the_api_key_goes_only_into_the_authorization_header(tmp_path: Path, canary: str) -> None:
    with FakeOllama() as server:
        server.set_responder(spy_then_fix)
        server.fail_next(Fault("status", 503))
        done = tracegen(spy_run(server.url, tmp_path), env=child_env(OLLAMA_API_KEY=canary))
        requests = server.requests
    assert done.returncode == 0, done.stderr
    assert "retrying" in done.stderr, "a retry should have been logged"

    (trace,) = read_jsonl(tmp_path / "traces.jsonl")
    (told,) = feedback(trace["messages"])
    assert "PATH" in told, "the spy's findings came back to the model"
    files = [p for p in tmp_path.iterdir() if p.is_file()]
    assert len(files) >= 3
    assert [p.name for p in files if canary.encode() in p.read_bytes()] == []
    assert canary not in done.stdout and canary not in done.stderr

    chats = [r for r in requests if r[0] == "/api/chat"]
    assert len(chats) == 3
    assert {headers.get("authorization") for _, _, headers in requests} == {f"Bearer {canary}"}
    for _, body, headers in requests:
        assert canary not in orjson.dumps(body).decode()
        assert [k for k, v in headers.items() if canary in v] == ["authorization"]


@pytest.mark.parametrize("failure", ["rejected key", "unreachable host", "doctor"])
def test_errors_about_the_server_never_print_the_key(
    tmp_path: Path, canary: str, failure: str
) -> None:
    env = child_env(OLLAMA_API_KEY=canary)
    with FakeOllama() as server:
        server.set_responder(spy_then_fix)
        if failure == "rejected key":
            server.fail_next(Fault("status", 401))
            done = tracegen(spy_run(server.url, tmp_path), env=env)
        elif failure == "unreachable host":
            done = tracegen(spy_run(f"http://127.0.0.1:{unused_port()}", tmp_path), env=env)
        else:
            done = tracegen(["doctor", "--host", server.url, "--model", "absent"], env=env)
    assert done.returncode == 1, done.stderr
    assert canary not in done.stdout + done.stderr
    if failure == "doctor":
        assert TRACEBACK not in done.stderr
        assert "ollama pull absent" in done.stdout
    else:
        assert EXPECTED[failure] in error_line(done.stderr)


def test_a_password_in_the_host_url_is_in_no_file_nor_line_printed(tmp_path: Path) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    with FakeOllama() as server:
        server.set_responder(spy_then_fix)
        server.fail_next(Fault("status", 503))
        host = server.url.replace("http://", f"http://me:{password}@")
        done = tracegen(spy_run(host, tmp_path))
    assert done.returncode == 0, done.stderr
    assert "retrying" in done.stderr
    assert password not in done.stdout + done.stderr
    assert [p.name for p in tmp_path.iterdir() if password.encode() in p.read_bytes()] == []
    (trace,) = read_jsonl(tmp_path / "traces.jsonl")
    assert trace["hosts"] == [host.replace(f"me:{password}", "***")]
