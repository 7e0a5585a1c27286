"""Each key goes only to the kind of server it belongs to, and a password in a host URL is in no
file and no line printed: the shards' manifest, `merge`'s hints, the Ctrl-C resume line."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.fake_openai import FakeOpenAI
from tests.support.runs import (
    Workspace,
    child_env,
    solver,
    spawn,
    tracegen,
    wait_for_records,
)
from tests.support.scenarios import TRACEBACK

pytestmark = pytest.mark.slow  # whole runs in a child process


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.with_problems(tmp_path, 4)


def secret() -> str:
    return f"sk-{uuid.uuid4().hex}"


def bearers(server: FakeOpenAI | FakeOllama) -> set[str | None]:
    return {headers.get("authorization") for _, _, headers in server.requests}


def openai_run(workspace: Workspace, server: FakeOpenAI, host: str | None = None) -> list[str]:
    return workspace.args(host or server.api, "--backend", "openai", "--limit", "1")


@pytest.mark.parametrize(
    ("env", "sent"),
    [
        ({"OLLAMA_API_KEY": "ollama"}, None),
        ({"OLLAMA_API_KEY": "ollama", "OPENAI_API_KEY": "openai"}, "Bearer openai"),
        ({"OLLAMA_API_KEY": "ollama", "TRACEGEN_API_KEY": "tracegen"}, "Bearer tracegen"),
        ({"OPENAI_API_KEY": "openai", "TRACEGEN_API_KEY": "tracegen"}, "Bearer openai"),
    ],
)
def test_an_openai_compatible_server_gets_its_own_key_never_ollamas(
    workspace: Workspace, env: dict[str, str], sent: str | None
) -> None:
    with FakeOpenAI("vllm") as server:
        server.set_responder(solver)
        done = tracegen(openai_run(workspace, server), env=child_env(**env))
    assert done.returncode == 0, done.stderr
    assert bearers(server) == {sent}


def test_ollama_gets_ollamas_key(workspace: Workspace) -> None:
    with FakeOllama() as server:
        server.set_responder(solver)
        env = child_env(OLLAMA_API_KEY="ollama", OPENAI_API_KEY="openai")
        done = tracegen(workspace.args(server, "--limit", "1"), env=env)
    assert done.returncode == 0, done.stderr
    assert bearers(server) == {"Bearer ollama"}


def test_a_password_in_the_url_and_a_key_together_are_refused_naming_both(
    workspace: Workspace,
) -> None:
    password, key = secret(), secret()
    with FakeOpenAI("vllm") as server:
        host = server.api.replace("http://", f"http://me:{password}@")
        done = tracegen(openai_run(workspace, server, host), env=child_env(OPENAI_API_KEY=key))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tracegen: error: http://***@127.0.0.1:")
    assert "OPENAI_API_KEY or TRACEGEN_API_KEY" in line and "give one" in line
    assert password not in done.stdout + done.stderr and key not in done.stdout + done.stderr
    assert server.requests == []


def test_a_password_in_the_url_alone_is_sent_as_basic_auth(workspace: Workspace) -> None:
    with FakeOpenAI("vllm") as server:
        server.set_responder(solver)
        host = server.api.replace("http://", "http://me:pw@")
        done = tracegen(openai_run(workspace, server, host))
    assert done.returncode == 0, done.stderr
    assert bearers(server) == {"Basic bWU6cHc="}


def test_the_shards_manifest_and_merge_hints_hide_the_password(workspace: Workspace) -> None:
    password = secret()
    with FakeOllama() as server:
        server.set_responder(solver)
        host = server.url.replace("http://", f"http://me:{password}@")
        done = tracegen(workspace.args(host, "--shard", "0/2"))
        assert done.returncode == 0, done.stderr
    manifest = workspace.dir / "traces.jsonl.manifest.json"
    assert manifest.exists()
    assert password not in manifest.read_text()
    assert "http://***@127.0.0.1" in manifest.read_text()
    merged = tracegen(["merge", str(workspace.dir / "m.jsonl"), str(workspace.dir / "traces-*")])
    assert merged.returncode == 2
    assert "run: tracegen run" in merged.stderr and "http://***@127.0.0.1" in merged.stderr
    assert password not in merged.stdout + merged.stderr
    assert [p.name for p in workspace.dir.iterdir() if password.encode() in p.read_bytes()] == []


def test_the_resume_line_after_ctrl_c_hides_the_password(workspace: Workspace) -> None:
    password = secret()
    with FakeOllama(latency_s=0.4) as server:
        server.set_responder(solver)
        host = server.url.replace("http://", f"http://me:{password}@")
        proc = spawn(workspace.args(host, "--concurrency", "1"))
        wait_for_records(workspace.out, 1, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert TRACEBACK not in stderr
    assert "to resume, run:" in stderr and "http://***@127.0.0.1" in stderr
    assert password not in stdout + stderr


@pytest.mark.parametrize("kind", ["vllm", "ollama"])
def test_with_the_backend_found_by_asking_only_that_kinds_key_meets_the_urls_password(
    kind: str,
) -> None:
    """``OLLAMA_API_KEY`` set for other uses does not stop a password-protected vLLM host; to
    an Ollama host, the key and the password together are refused."""
    with FakeOpenAI("vllm") if kind == "vllm" else FakeOllama() as server:
        url = server.api if isinstance(server, FakeOpenAI) else server.url
        host = url.replace("http://", "http://me:pw@")
        args = ["doctor", "--host", host, "--model", "test-model"]
        done = tracegen(args, env=child_env(OLLAMA_API_KEY="ollama"))
    if kind == "vllm":
        assert done.returncode == 0, done.stdout + done.stderr
        assert bearers(server) == {"Basic bWU6cHc="}
    else:
        assert done.returncode == 2 and "TRACEGEN_API_KEY or OLLAMA_API_KEY" in done.stderr
        assert "Bearer ollama" not in bearers(server)
