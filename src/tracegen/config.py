"""Settings: flags > environment (``TRACEGEN_*``, ``OLLAMA_*``) > config file."""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo

from tracegen.errors import ConfigError
from tracegen.schema import ContinueMethod

DEFAULT_PORT = 11434
DEFAULT_HOST = f"http://localhost:{DEFAULT_PORT}"
ENV_PREFIX = "TRACEGEN_"
SANDBOXES: dict[str, str] = {
    "auto": "bubblewrap where it runs, else builtin",
    "bwrap": "bubblewrap over the built-in layers",
    "builtin": "user, network and mount namespaces, Landlock, seccomp: no binary needed",
    "rlimit": "resource limits only: weak, used only when asked for",
}
"""The isolations ``--sandbox`` takes, each with what it is (docs: Sandbox)."""
ContinueChoice = Literal["auto", ContinueMethod]
S = TypeVar("S", bound=BaseModel)

# Upper bounds of the settings (docs/backends.md, Configuration): beyond them a value is a mistake,
# and every value stays within what JSON writers and the server's 64-bit integers hold.
MAX_SEED = 2**63 - 1
MAX_TOKENS = 2**24
"""Context size and tokens per turn: 16,777,216."""
MAX_TOP_K = 1_000_000
MAX_STEPS = 10_000
"""Execute-and-fix rounds, model turns, tries per request."""
MAX_CONCURRENCY = 1024
MAX_SAMPLES = 10_000
MAX_HOSTS = 256
MAX_LIMIT = 10**9
MAX_ANSWER_BYTES = 2**40
"""The most ``max_answer_bytes`` may be: 1 TiB."""
MIN_SECONDS = 0.001
MAX_SECONDS = 7 * 86_400
REQUEST_TIMEOUT_S = 600.0
"""Seconds one model request may take, by default."""
RETRY_ATTEMPTS = 5
RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 30.0
RETRY_MAX_WAITING_S = 120.0
"""How a model request is tried again, by default (`tracegen.llm.retries.RetryPolicy`): at most
``RETRY_ATTEMPTS`` tries, waiting a random time up to ``RETRY_INITIAL_S · 2^n`` capped at
``RETRY_MAX_S``, at most ``RETRY_MAX_WAITING_S`` in all. Declared here once: the settings, the
policy and the backends take these."""
MAX_OUTAGE_S = 600.0
"""Seconds every host may fail in a row before the run stops, by default (the ``max_outage_s``
setting and `tracegen.llm.pool.HostPool`)."""
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")

GENERATION_PANEL = "Generation"
RUN_PANEL = "Run"
MODEL_PANEL = "Model and server"
PROBLEMS_PANEL = "Problems"
OUTPUT_PANEL = "Output"


def cli(
    *,
    option: bool = True,
    panel: str | None = None,
    flags: tuple[str, ...] = (),
    repeat: bool = False,
    env: tuple[str, ...] = (),
    choices: str | None = None,
) -> dict[str, Any]:
    """How a setting appears on the command line (``json_schema_extra`` of its field): in
    which help panel (default: Generation for the fields of `GenerationSettings`, Run for
    the others), under which flags (default: ``--the-name``), whether it repeats, and which
    environment variables set it besides ``TRACEGEN_THE_NAME`` (``env``: read when that one
    is not set, as other tools name them: ``OLLAMA_HOST``). ``choices``: the registry whose
    names the setting takes, as ``module:NAME`` (a dict, or a function returning the names),
    read when help or the settings page is made: they list its keys, never a copy."""
    return {
        "cli": {
            "option": option,
            "panel": panel,
            "flags": list(flags),
            "repeat": repeat,
            "env": list(env),
            "choices": choices,
        }
    }


NO_CLI = cli(option=False)
"""A setting read from the environment or a config file only."""


def env_names(name: str, field: FieldInfo) -> list[str]:
    """The environment variables that set the setting ``name``, the one read first first."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    shown = extra.get("cli")
    others = shown.get("env") if isinstance(shown, dict) else None
    return [ENV_PREFIX + name.upper(), *map(str, others if isinstance(others, list) else [])]


def shown_default(field: FieldInfo) -> str | None:
    """A setting's default as help shows it (None: no default to show)."""
    factory = field.default_factory
    value = factory() if factory is not None else field.default  # type: ignore[call-arg]
    if value is None or value is False:
        return None
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: ``http://***@gpu1:11434``."""
    return _USERINFO.sub("***@", text)


class GenerationSettings(BaseModel):
    """Everything that shapes a trace. Its hash guards resume against mixing settings.

    Each field is declared once, here: its type, default and bounds, and as its description
    the help of the `tracegen run` option made from it (`tracegen.cli.settings_options`),
    of its ``TRACEGEN_*`` variable, config key and RL adapters' field. ``cli(...)`` gives an
    option its panel and flags; a field without an option says ``cli(option=False)``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: str = Field(
        default="inline-tools",
        description="Conversation protocol (docs: Modes).",
        json_schema_extra=cli(choices="tracegen.modes.registry:MODES"),
    )
    model: str = Field(
        default="qwen3:8b",
        min_length=1,
        description="Model name as the server knows it; for --backend local a GGUF file or a "
        "packaged model (smollm2-135m, gemma3-270m).",
        json_schema_extra=cli(panel=MODEL_PANEL),
    )
    temperature: float = Field(default=0.7, ge=0.0, description="Sampling temperature.")
    top_p: float | None = Field(
        default=None, gt=0.0, le=1.0, description="Nucleus sampling.", json_schema_extra=NO_CLI
    )
    top_k: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOP_K,
        description="Top-k sampling.",
        json_schema_extra=NO_CLI,
    )
    seed: int | None = Field(
        default=None,
        ge=-MAX_SEED - 1,
        le=MAX_SEED,
        description="Fixes sampling seeds and work order.",
    )
    num_ctx: int = Field(default=8192, ge=256, le=MAX_TOKENS, description="Context size.")
    max_tokens: int = Field(
        default=2048, ge=1, le=MAX_TOKENS, description="Tokens per model turn (num_predict)."
    )
    max_iterations: int = Field(
        default=5, ge=1, le=MAX_STEPS, description="Execute-and-fix rounds."
    )
    max_steps: int = Field(
        default=24, ge=1, le=MAX_STEPS, description="Model turns or steps per episode."
    )
    think: bool | None = Field(
        default=None, description="Ask a thinking model to think.", json_schema_extra=NO_CLI
    )
    top_logprobs: int = Field(default=0, ge=0, le=20, description="Alternatives per token (0-20).")
    logprobs: Literal["raw", "processed"] = Field(
        default="raw",
        description="raw (the model's distribution) or processed (the sampler's, after "
        "temperature and truncation, where the backend gives it: docs: Training, Which "
        "logprobs).",
    )
    continuation: ContinueChoice = Field(
        default="auto",
        description="inline-tools: auto (the server's best), prefill, raw or continue.",
    )
    tool_parser: str | None = Field(
        default="auto",
        description="native-tools: format of tool calls written as text: auto (from the chat "
        "template or the model's name) or a family (docs: Modes, Tool calls).",
    )
    exec_timeout: float = Field(
        default=10.0,
        ge=MIN_SECONDS,
        le=86_400,
        description="Seconds each execution may run.",
        json_schema_extra=cli(panel=RUN_PANEL),
    )
    prompts_dir: Path | None = Field(
        default=None, description="Folder of system prompts overriding the shipped ones."
    )
    constrain: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Constrain decoding to the mode's grammar: auto (where it helps the "
        "embedded model), on, off.",
    )
    chat_template: Path | None = Field(
        default=None,
        description="--backend local: a Jinja chat template file for the model.",
        json_schema_extra=cli(panel=MODEL_PANEL),
    )

    def record(self, prompt_text: str, *, constrained: bool = False) -> dict[str, Any]:
        """These settings and the hash of the system prompt actually used, as the run's state
        file records them: exactly what `digest` hashes; ``constrained``: whether the run
        decided to constrain decoding (`tracegen.episode.spec.Choices`). Settings added later
        are left out while they have no effect (unconstrained decoding, the model's own
        template), so files made before them resume."""
        data = self.model_dump(mode="json", exclude={"prompts_dir"})
        if constrained or data["constrain"] == "on":
            data["constrain"] = "on"
        else:
            del data["constrain"]
        if data["chat_template"] is None:
            del data["chat_template"]
        if data["logprobs"] == "raw":
            del data["logprobs"]
        if data["tool_parser"] == "auto":
            data["tool_parser"] = None
        data["prompt_sha256"] = hashlib.sha256(prompt_text.encode()).hexdigest()
        return data

    def digest(self, prompt_text: str, *, constrained: bool = False) -> str:
        """A short hash of these settings and the system prompt actually used."""
        record = self.record(prompt_text, constrained=constrained)
        data = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(data).hexdigest()[:16]


class RunSettings(GenerationSettings):
    """`tracegen run`: generation settings plus where and how to run them."""

    backend: str = Field(
        default="auto",
        description="Server kind (openai: an OpenAI-compatible server; local: llama.cpp in "
        "process); auto finds out what answers at each host, and runs the embedded model "
        "when no host or model is given and nothing answers at Ollama's address.",
        json_schema_extra=cli(panel=MODEL_PANEL, choices="tracegen.llm.factory:backend_names"),
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="--backend local: llama.cpp threads (default: one per idle core, as "
        "measured best, see docs/performance.md).",
    )
    hosts: list[str] = Field(
        default_factory=lambda: [DEFAULT_HOST],
        min_length=1,
        max_length=MAX_HOSTS,
        description="Server URL (an OpenAI-compatible one with or without /v1); repeat for "
        "several.",
        json_schema_extra=cli(
            panel=MODEL_PANEL, flags=("--host",), repeat=True, env=("OLLAMA_HOST",)
        ),
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="The key of Ollama, or of an OpenAI-compatible server without its own.",
        json_schema_extra=NO_CLI,
    )
    ollama_api_key: SecretStr | None = Field(
        default=None,
        description="Ollama Cloud's key: sent to Ollama only.",
        json_schema_extra=cli(option=False, env=("OLLAMA_API_KEY",)),
    )
    openai_api_key: SecretStr | None = Field(
        default=None,
        description="An OpenAI-compatible server's key.",
        json_schema_extra=cli(option=False, env=("OPENAI_API_KEY",)),
    )
    problems: str = Field(
        default="builtin",
        description="A problem set by name, or a file (tracegen JSONL/YAML, HumanEval).",
        json_schema_extra=cli(
            panel=PROBLEMS_PANEL, choices="tracegen.problems.loader:source_names"
        ),
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LIMIT,
        description="Use only the first N problems.",
        json_schema_extra=cli(panel=PROBLEMS_PANEL),
    )
    problem_ids: list[str] | None = Field(
        default=None,
        description="Comma-separated problem ids to use.",
        json_schema_extra=cli(panel=PROBLEMS_PANEL),
    )
    output: Path = Field(
        default=Path("traces.jsonl"),
        description="Traces file (JSONL).",
        json_schema_extra=cli(panel=OUTPUT_PANEL, flags=("-o", "--output")),
    )
    rejects: Path | None = Field(
        default=None,
        description="Write rejected traces and failed episodes here.",
        json_schema_extra=cli(panel=OUTPUT_PANEL),
    )
    num_samples: int = Field(default=1, ge=1, le=MAX_SAMPLES, description="Samples per problem.")
    concurrency: int = Field(
        default=4, ge=1, le=MAX_CONCURRENCY, description="In-flight episodes per host."
    )
    only_success: bool = Field(
        default=False,
        description="Keep traces that pass every test.",
        json_schema_extra=cli(panel=OUTPUT_PANEL),
    )
    only_ideal: bool = Field(
        default=False,
        description="Keep successful traces of ideal shape.",
        json_schema_extra=cli(panel=OUTPUT_PANEL),
    )
    overwrite: bool = Field(
        default=False,
        description="Start the output file afresh.",
        json_schema_extra=cli(panel=OUTPUT_PANEL),
    )
    sandbox: str = Field(
        default="auto",
        description="Isolation of the generated code (docs: Sandbox).",
        json_schema_extra=cli(choices="tracegen.config:SANDBOXES"),
    )
    sandbox_packages: bool = Field(
        default=False,
        description="Let generated code import the packages installed beside tracegen "
        "(numpy...), read-only; by default only the standard library.",
    )
    require_logprobs: bool = Field(
        default=False,
        description="Fail if the server returns none.",
        json_schema_extra=cli(panel=MODEL_PANEL),
    )
    shard: str | None = Field(
        default=None,
        description="Run one part of the plan: I/N (0 ≤ I < N), or auto / auto/N from a "
        "Slurm, Kubernetes or SGE job array; join the parts with `tracegen merge`.",
    )
    executor: Literal["local", "ray"] = Field(
        default="local",
        description="Where episodes run: local or ray (actors across a Ray cluster).",
    )
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster to join: auto, or HOST:PORT (default: RAY_ADDRESS, else a "
        "local Ray).",
    )
    request_timeout_s: float = Field(
        default=REQUEST_TIMEOUT_S,
        ge=MIN_SECONDS,
        le=MAX_SECONDS,
        description="Seconds one model request may take.",
        json_schema_extra=NO_CLI,
    )
    max_attempts: int = Field(
        default=RETRY_ATTEMPTS,
        ge=1,
        le=MAX_STEPS,
        description="Tries per model request.",
        json_schema_extra=NO_CLI,
    )
    max_answer_bytes: int | None = Field(
        default=None,
        ge=1024,
        le=MAX_ANSWER_BYTES,
        description="The most bytes one model answer may hold (default: from max_tokens).",
        json_schema_extra=NO_CLI,
    )
    max_outage_s: float = Field(
        default=MAX_OUTAGE_S,
        ge=MIN_SECONDS,
        le=MAX_SECONDS,
        description="Seconds every host may fail in a row before the run stops with exit 1 "
        "(a server restarting within it is waited out); a model request is also given up "
        "after this long, whatever request_timeout_s says.",
    )
    retry_initial_s: float = Field(
        default=RETRY_INITIAL_S,
        ge=0,
        le=MAX_SECONDS,
        description="First retry wait, doubling.",
        json_schema_extra=NO_CLI,
    )
    quiet: bool = Field(
        default=False,
        description="No progress output.",
        json_schema_extra=cli(panel=OUTPUT_PANEL, flags=("--quiet", "-q")),
    )

    @field_validator("hosts", mode="before")
    @classmethod
    def _split_hosts(cls, v: Any) -> Any:
        """Comma-separated or a list; normalized, each host once."""
        if isinstance(v, str):
            v = [h for h in v.split(",") if h.strip()]
        if not isinstance(v, list):
            return v
        return list(dict.fromkeys(normalize_host(h) for h in v))

    @field_validator("sandbox")
    @classmethod
    def _known_sandbox(cls, v: str) -> str:
        if v not in SANDBOXES:
            raise ValueError(f"expected one of {', '.join(SANDBOXES)}, got {v!r}")
        return v

    @field_validator("problem_ids", mode="before")
    @classmethod
    def _split_ids(cls, v: Any) -> Any:
        """Comma-separated or a list; naming no id at all is a mistake, not "every problem"."""
        if isinstance(v, str):
            v = [i.strip() for i in v.split(",") if i.strip()]
        if isinstance(v, list) and not v:
            raise ValueError("names no problem id")
        return v

    @field_validator("output", "rejects")
    @classmethod
    def _names_a_file(cls, v: Path | None) -> Path | None:
        if v is not None and v.name in ("", ".", ".."):
            raise ValueError(f"{str(v)!r} names no file")
        return v

    def generation(self, **decided: Any) -> GenerationSettings:
        """The settings that shape the traces, with what the run decided in place of the
        values given (``decided``: the model ``--backend auto`` settled on, a first run's
        preset), checked as given ones are."""
        given = self.model_dump(include=set(GenerationSettings.model_fields))
        return GenerationSettings.model_validate(given | decided)


def normalize_host(host: str) -> str:
    """``gpu1`` → ``http://gpu1:11434`` (no trailing slash); checks it is a URL.

    As Ollama reads ``OLLAMA_HOST``: without a scheme, http and port 11434 unless one is given.
    """
    host = host.strip().rstrip("/")
    if not host:
        raise ValueError("empty host")
    bare = "://" not in host
    if bare:
        host = f"http://{host}"
    try:
        parts = urlsplit(host)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{redact_url(host)!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{redact_url(host)!r} is not an http:// or https:// URL")
    if bare and port is None:
        host = f"http://{parts.netloc}:{DEFAULT_PORT}{parts.path}"
    return host


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: values nested too deeply") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None


def _from_env(env: Mapping[str, str], fields: Mapping[str, FieldInfo]) -> dict[str, Any]:
    """Each setting the environment sets: from the first of its `env_names` that is set."""
    out: dict[str, Any] = {}
    for name, field in fields.items():
        value = next((env[v] for v in env_names(name, field) if env.get(v)), None)
        if value is not None:
            out[name] = value
    return out


def load_settings(
    model: type[S],
    flags: Mapping[str, Any],
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> S:
    """Merge config file < environment < flags (``None`` flags are unset) and validate."""
    env = os.environ if env is None else env
    fields = model.model_fields
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    if config_file is not None:
        data = _from_file(config_file)
        data = {k.replace("-", "_"): v for k, v in data.items()}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ConfigError(f"{config_file}: unknown key {unknown[0]!r}")
        merged.update(data)
        source.update(dict.fromkeys(data, str(config_file)))
    env_values = _from_env(env, fields)
    merged.update(env_values)
    source.update({k: "environment" for k in env_values})
    flag_values = {k: v for k, v in flags.items() if v is not None}
    merged.update(flag_values)
    source.update({k: "flag" for k in flag_values})
    try:
        return model.model_validate(merged)
    except ValidationError as e:
        first = e.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "settings"
        where = source.get(key, "settings")
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{key.replace('_', '-')} ({where}): {message}") from None
