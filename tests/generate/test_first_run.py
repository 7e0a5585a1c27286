"""A first run: the default embedded model with no problems named takes the starter set."""

from __future__ import annotations

import pytest

from tracegen.config import RunSettings, load_settings
from tracegen.generate.command import starts_small
from tracegen.llm.packaged import DEFAULT_MODEL


def settings(env: dict[str, str] | None = None, **flags: object) -> RunSettings:
    chosen = load_settings(RunSettings, flags, env=env or {})
    return chosen.model_copy(update={"backend": "local", "model": DEFAULT_MODEL})


def test_default_model_with_no_problems_named_starts_small() -> None:
    assert starts_small(settings())


@pytest.mark.parametrize(
    "flags",
    [{"problems": "builtin"}, {"problem_ids": "two_sum"}, {"problems": "humaneval"}],
)
def test_problems_named_by_flag_are_kept(flags: dict[str, object]) -> None:
    assert not starts_small(settings(**flags))


def test_problems_named_in_the_environment_are_kept() -> None:
    assert not starts_small(settings(env={"TRACEGEN_PROBLEMS": "builtin"}))


def test_another_model_keeps_the_builtin_set() -> None:
    chosen = load_settings(RunSettings, {}, env={})
    other = chosen.model_copy(update={"backend": "local", "model": "gemma3-270m"})
    assert not starts_small(other)
