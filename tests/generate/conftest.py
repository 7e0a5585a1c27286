"""Fixtures of the run tests: a workspace with 12 problems, the scripted model, the CLI in
process, one Ray instance for the session."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import Workspace, solver
from tracegen.cli import app


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.with_problems(tmp_path, 12)


@pytest.fixture
def model(fake_ollama: FakeOllama) -> FakeOllama:
    """The loopback server answering with `solver`."""
    fake_ollama.set_responder(solver)
    return fake_ollama


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """Run ``tracegen ARGS`` in-process; the environment cannot leak settings in."""
    for name in list(os.environ):
        if name.startswith(("TRACEGEN_", "OLLAMA_", "OPENAI_")):
            monkeypatch.delenv(name)
    runner = CliRunner()

    def invoke(args: list[str]):
        return runner.invoke(app, args, catch_exceptions=False)

    return invoke


FAST_HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 3,
}
"""A dead node is noticed in seconds rather than Ray's default of about half a minute."""


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """One Ray instance for the whole session: a head node in a private temporary folder,
    usage stats off, no dashboard, a small object store; its ``address`` is the head's. It
    is ended with the session (never with ``ray stop``, which would end every Ray process
    on the machine)."""
    pytest.importorskip("ray")
    temp = Path(tempfile.mkdtemp(prefix="tgray", dir="/tmp"))  # short: it holds unix sockets
    (temp / "ray").mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", str(temp))
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "object_store_memory": 80 << 20,
                "_system_config": FAST_HEALTH_CHECKS,
            },
        )
        try:
            yield cluster
        finally:
            cluster.shutdown()
            shutil.rmtree(temp, ignore_errors=True)
