"""tracegen's settings as Atropos ``--env.*`` fields, taken from `tracegen.config.RunSettings`.

The environment's config class declares none of them by hand: each field named in
`TRACEGEN_FIELDS` is `RunSettings`' own (type, default, description), and the values are
validated by building the `RunSettings` a ``tracegen run`` would use, with the policy server
of Atropos's ``--openai.*`` flags as its one host: the same defaults, the same checks, one line
naming the flag when a value is wrong. Atropos drops a field's constraints when it makes its
flags (``atroposlib/utils/cli.py``, ``get_prefixed_pydantic_model``), so the fields here carry
none either: `run_settings` is the one place values are checked.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic.fields import FieldInfo

from tracegen.config import RunSettings
from tracegen.errors import ConfigError

TRACEGEN_FIELDS = (
    "mode",
    "problems",
    "limit",
    "problem_ids",
    "num_samples",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "num_ctx",
    "max_tokens",
    "max_iterations",
    "max_steps",
    "think",
    "top_logprobs",
    "logprobs",
    "continuation",
    "tool_parser",
    "exec_timeout",
    "prompts_dir",
    "constrain",
    "sandbox",
    "concurrency",
    "request_timeout_s",
    "max_attempts",
    "retry_initial_s",
)
"""The `RunSettings` an Atropos environment takes as ``--env.NAME``. Left out: where the model
is (``--openai.base_url``, ``--openai.model_name``, ``--openai.api_key`` say it), the output
files and filters of ``tracegen run`` (a group keeps every episode: a group of survivors is a
biased group), and how a run is spread (shards, Ray)."""

SERVER_FIELDS = {"hosts": "openai.base_url", "model": "openai.model_name"}
"""`RunSettings` fields filled from Atropos's server config, and the flag each comes from."""

TokenIds = Literal["exact", "retokenized"]


def tracegen_fields() -> dict[str, Any]:
    """``name → (annotation, Field)`` of every field in `TRACEGEN_FIELDS`, as `RunSettings`
    declares it (default, description), for ``pydantic.create_model``."""
    fields: dict[str, Any] = {}
    for name in TRACEGEN_FIELDS:
        declared: FieldInfo = RunSettings.model_fields[name]
        kw: dict[str, Any] = {"description": declared.description}
        if declared.default_factory is not None:
            kw["default_factory"] = declared.default_factory
        else:
            kw["default"] = declared.default
        fields[name] = (declared.annotation, Field(**kw))
    return fields


def _flag(name: str) -> str:
    return "--" + SERVER_FIELDS.get(name, f"env.{name}")


def run_settings(
    values: dict[str, Any], *, base_url: str | None, model_name: str, api_key: str | None
) -> RunSettings:
    """The `RunSettings` of an environment: its ``--env.*`` ``values`` and the policy server
    (an OpenAI-compatible host), checked; a `ConfigError` naming the flag when a value is
    wrong."""
    if not base_url:
        raise ConfigError("--openai.base_url: name the policy server (e.g. http://HOST:8000/v1)")
    flags = {name: values[name] for name in TRACEGEN_FIELDS if values.get(name) is not None}
    flags |= {"backend": "openai", "hosts": [base_url], "model": model_name, "quiet": True}
    if api_key:
        flags["openai_api_key"] = api_key
    try:
        return RunSettings.model_validate(flags)
    except ValidationError as e:
        first = e.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "settings"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{_flag(name)}: {message}") from None
