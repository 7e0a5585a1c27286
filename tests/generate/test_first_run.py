"""A first run: the default embedded model with no problems named takes the starter set."""

from __future__ import annotations

import pytest

from tracegen.config import RunSettings, load_settings
from tracegen.generate.first_run import FIRST_RUN, STARTER_PROBLEMS, first_run, starts_small
from tracegen.llm.factory import BackendChoice
from tracegen.llm.packaged import DEFAULT_MODEL

EMBEDDED = BackendChoice("local", DEFAULT_MODEL)
"""What ``--backend auto`` comes to with nothing named and nothing answering."""


def settings(env: dict[str, str] | None = None, **flags: object) -> RunSettings:
    return load_settings(RunSettings, flags, env=env or {})


def test_default_model_with_no_problems_named_starts_small() -> None:
    assert starts_small(settings(), EMBEDDED)


@pytest.mark.parametrize(
    "flags",
    [{"problems": "builtin"}, {"problem_ids": "two_sum"}, {"problems": "humaneval"}],
)
def test_problems_named_by_flag_are_kept(flags: dict[str, object]) -> None:
    assert not starts_small(settings(**flags), EMBEDDED)


def test_problems_named_in_the_environment_are_kept() -> None:
    assert not starts_small(settings(env={"TRACEGEN_PROBLEMS": "builtin"}), EMBEDDED)


def test_another_model_keeps_the_builtin_set() -> None:
    assert not starts_small(settings(), BackendChoice("local", "gemma3-270m"))


def test_a_server_keeps_the_settings_as_given() -> None:
    assert not starts_small(settings(), BackendChoice("auto", DEFAULT_MODEL))


def test_a_first_run_takes_the_preset_and_says_so() -> None:
    update, said = first_run(settings())
    assert update == {"problems": STARTER_PROBLEMS, **FIRST_RUN}
    for key, value in FIRST_RUN.items():
        assert f"--{key.replace('_', '-')} {value}" in said
    assert said.startswith("no problems named: the starter set")


@pytest.mark.parametrize("key", sorted(FIRST_RUN))
def test_a_generation_setting_given_by_flag_keeps_the_whole_preset_away(key: str) -> None:
    given = {"mode": "markers", "max_tokens": 1000, "num_samples": 3, "max_iterations": 2}
    update, said = first_run(settings(**{key: given[key]}))
    assert update == {"problems": STARTER_PROBLEMS}
    assert f"settings given (--{key.replace('_', '-')}: no first-run preset)" in said


def test_a_generation_setting_given_in_the_environment_keeps_the_preset_away() -> None:
    update, said = first_run(settings(env={"TRACEGEN_TEMPERATURE": "0.2"}))
    assert update == {"problems": STARTER_PROBLEMS}
    assert "--mode" not in said and "no first-run preset" in said


def test_run_settings_alone_keep_the_preset() -> None:
    update, _ = first_run(settings(limit=3, concurrency=2, quiet=True))
    assert update == {"problems": STARTER_PROBLEMS, **FIRST_RUN}
