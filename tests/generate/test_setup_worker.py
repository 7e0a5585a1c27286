"""`prepare` decides a run once, on a frozen `RunSetup`, leaving the settings as given; an
`EpisodeWorker` runs its episodes on a warm sandbox."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import write_problems
from tests.support.scenarios import unused_port
from tracegen.config import RunSettings, load_settings
from tracegen.errors import ConfigError
from tracegen.generate.first_run import FIRST_RUN, STARTER_PROBLEMS
from tracegen.generate.setup import RunSetup, describe, prepare
from tracegen.generate.worker import EpisodeWorker
from tracegen.llm import factory
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.packaged import DEFAULT_MODEL


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


async def test_an_auto_backend_is_recorded_as_the_kind_that_answered(tmp_path: Path) -> None:
    setup = await prepare(settings(tmp_path, backend="auto", mode="markers", hosts=["http://h"]))
    assert setup.header()["backend"] == "auto" and setup.capabilities is None
    answered = setup.answered("ollama")
    assert answered.header()["backend"] == "ollama" and answered.capabilities is not None
    assert answered.answered("openai") is answered
    assert describe(answered.header()).startswith("mode markers · backend ollama · model qwen3:8b")


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


async def test_a_first_run_records_its_backend_and_preset_on_the_setup_not_in_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--backend auto`` with nothing named and nothing answering settles on the embedded
    model, and a first run takes the starter set and its preset: both are the setup's, the
    settings stay as given, and the plan is the one the same choices given as flags make (a
    run resumed with them finds it)."""
    monkeypatch.setattr(factory, "DEFAULT_HOST", f"http://127.0.0.1:{unused_port()}")
    given = load_settings(RunSettings, {}, env={})
    before = given.model_dump()
    said: list[str] = []
    setup = await prepare(given, said.append)
    assert given.model_dump() == before and given.backend == "auto"
    assert (setup.backend, setup.model) == ("local", DEFAULT_MODEL)
    assert setup.problem_set == STARTER_PROBLEMS
    assert setup.plan.num_samples == FIRST_RUN["num_samples"]
    assert setup.generation.max_tokens == FIRST_RUN["max_tokens"]
    assert setup.mode.name == setup.generation.mode == FIRST_RUN["mode"]
    assert {"backend": "local", "model": DEFAULT_MODEL}.items() <= setup.header().items()
    assert setup.header()["problems"] == STARTER_PROBLEMS
    assert setup.header()["first_run"] == setup.first_run is not None
    assert describe(setup.header()).endswith(f"problems {STARTER_PROBLEMS} · first run")
    assert any(line.startswith("no problems named: the starter set") for line in said), said
    flags = {"backend": "local", "model": DEFAULT_MODEL, "problems": STARTER_PROBLEMS}
    explicit = await prepare(load_settings(RunSettings, flags | FIRST_RUN, env={}))
    assert explicit.first_run is None
    assert explicit.plan.settings_hash == setup.plan.settings_hash
    assert explicit.plan.record() == setup.plan.record()
    assert [s.trace_id for s in explicit.plan.specs(set())] == [
        s.trace_id for s in setup.plan.specs(set())
    ]
