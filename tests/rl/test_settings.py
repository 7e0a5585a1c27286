"""The Atropos environment's ``--env.*`` settings are `RunSettings`' own: same defaults, same
checks, one line naming the flag (no atroposlib needed)."""

from __future__ import annotations

import pytest

from tracegen.atropos.settings import TRACEGEN_FIELDS, run_settings, tracegen_fields
from tracegen.config import RunSettings
from tracegen.errors import ConfigError

SERVER = {"base_url": "http://127.0.0.1:8000/v1", "model_name": "policy", "api_key": "k"}


def test_every_field_is_run_settings_own_with_its_default() -> None:
    fields = tracegen_fields()
    assert list(fields) == list(TRACEGEN_FIELDS)
    defaults = RunSettings()
    for name, (annotation, info) in fields.items():
        declared = RunSettings.model_fields[name]
        assert annotation == declared.annotation
        assert info.get_default(call_default_factory=True) == getattr(defaults, name)
        assert info.description == declared.description


def test_the_policy_server_is_the_one_host() -> None:
    settings = run_settings({"mode": "markers", "max_iterations": 3}, **SERVER)
    assert settings.backend == "openai"
    assert settings.hosts == ["http://127.0.0.1:8000/v1"]
    assert settings.model == "policy"
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == "k"
    assert (settings.mode, settings.max_iterations) == ("markers", 3)
    assert settings.temperature == RunSettings().temperature


@pytest.mark.parametrize(
    ("values", "server", "message"),
    [
        ({"max_iterations": 0}, {}, "--env.max_iterations: Input should be greater than"),
        (
            {"sandbox": "docker"},
            {},
            "--env.sandbox: expected one of auto, bwrap, builtin, rlimit",
        ),
        ({"problem_ids": []}, {}, "--env.problem_ids: names no problem id"),
        ({}, {"base_url": "ftp://x"}, "--openai.base_url: 'ftp://x' is not an"),
        ({}, {"base_url": ""}, "--openai.base_url: name the policy server"),
        ({}, {"model_name": ""}, "--openai.model_name: String should have at least 1"),
    ],
)
def test_a_wrong_value_is_one_line_naming_its_flag(
    values: dict[str, object], server: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        run_settings(values, **(SERVER | server))
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_logprobs_are_asked_for_as_run_asks_for_them() -> None:
    assert run_settings({"logprobs": "processed"}, **SERVER).logprobs == "processed"
    assert run_settings({}, **SERVER).logprobs == RunSettings().logprobs
    with pytest.raises(ConfigError, match=r"^--env\.logprobs: Input should be 'raw'"):
        run_settings({"logprobs": "sampled"}, **SERVER)
