"""`prepare` decides a run once, on a frozen `RunSetup`, leaving the settings as given; an
`EpisodeWorker` runs its episodes on a warm sandbox."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import write_problems
from tracegen.config import RunSettings
from tracegen.errors import ConfigError
from tracegen.generate.setup import RunSetup, prepare
from tracegen.generate.worker import EpisodeWorker
from tracegen.llm.ollama import OllamaBackend


def settings(tmp_path: Path, **given: object) -> RunSettings:
    problems = write_problems(tmp_path / "problems.jsonl", 3)
    return RunSettings.model_validate(
        {"backend": "ollama", "model": "qwen3:8b", "problems": str(problems)} | given
    )


async def test_prepare_records_its_choices_on_the_setup_not_in_the_settings(
    tmp_path: Path,
) -> None:
    given = settings(tmp_path, backend="openai", mode="native-tools", num_samples=2, constrain="on")
    before = given.model_dump()
    said: list[str] = []
    setup = await prepare(given, said.append)
    assert given.model_dump() == before
    assert setup.settings.constrain == "on" and setup.choices.constrain
    assert setup.choices.tool_parser == "hermes"
    assert len(said) == 1 and said[0].startswith("tool parser: hermes")
    assert setup.plan.size == 6 and len(setup.problems) == 3
    spec = next(setup.plan.specs(set()))
    assert spec.choices == setup.choices
    assert setup.plan.record()["constrain"] == "on"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setup.backend = "openai"  # type: ignore[misc]


async def test_auto_constrains_only_the_embedded_model(tmp_path: Path) -> None:
    setup = await prepare(settings(tmp_path, mode="markers"))
    assert not setup.choices.constrain
    assert "constrain" not in setup.plan.record()
    assert setup.header()["constrain"] is False


async def test_an_unknown_mode_is_refused_before_anything_else(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope"):
        await prepare(settings(tmp_path, mode="nope"))


async def test_the_embedded_model_cannot_serve_episodes_run_elsewhere(tmp_path: Path) -> None:
    given = settings(tmp_path).model_copy(update={"backend": "local", "executor": "ray"})
    with pytest.raises(ConfigError, match="--executor ray"):
        await prepare(given, in_process=False)


async def test_a_worker_runs_an_episode_and_counts_its_executions(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    given = settings(tmp_path, mode="markers", sandbox="rlimit", model="test-model")
    setup: RunSetup = await prepare(given)
    spec = next(setup.plan.specs(set()))
    fake_ollama.script("<think>easy</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>")
    async with (
        OllamaBackend(fake_ollama.url, "test-model") as backend,
        EpisodeWorker(setup.settings, backend) as worker,
    ):
        trace = await worker.run(spec)
    assert trace.error is None, trace.error
    assert trace.id == spec.trace_id and trace.success
    assert worker.executions == 1
