"""`prepare(settings) -> RunSetup`: a run decided once, before anything runs.

Every entry point — `tracegen run`, the Ray executor's actors, the Atropos and TRL
environments, a library user — starts from the same frozen `RunSetup`: the mode, its system
prompt, the problems and the plan; the backend kind and what it can do; what the run decided
(`tracegen.episode.spec.Choices`: constrained decoding, the tool-call parser); a first run's
preset; the retry policy. Decisions are recorded here and said in the run's header, never
written back into the settings; episodes then run through `tracegen.generate.worker.EpisodeWorker`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracegen.config import GenerationSettings, RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.episode.spec import Choices
from tracegen.errors import ConfigError
from tracegen.generate.first_run import first_run, starts_small
from tracegen.generate.plan import Plan
from tracegen.llm.base import Capabilities
from tracegen.llm.factory import (
    choose_backend,
    known_capabilities,
    local_backend,
    runs_in_process,
)
from tracegen.llm.local import LocalBackend
from tracegen.llm.retries import RetryPolicy
from tracegen.modes import Mode, get_mode
from tracegen.parsing.tool_parsers import choose_parser
from tracegen.problems import load_problems
from tracegen.schema import Problem

Say = Callable[[str], None]


@dataclass(frozen=True)
class RunSetup:
    """One run, decided (see the module docstring)."""

    settings: RunSettings
    """The settings the run uses: as given, with the embedded model when ``--backend auto``
    settled on it (its kind and default model) and a first run's problems and preset; the
    user's own settings object is never changed."""
    mode: Mode
    prompt: str
    """The mode's system prompt, as sent."""
    problems: Sequence[Problem]
    plan: Plan
    backend: str
    """The backend kind: local, ollama, openai; auto until a server answers (the pool's
    ``kind`` then says which)."""
    capabilities: Capabilities | None
    """What the backend kind can do, where known before anything answers."""
    choices: Choices
    retry: RetryPolicy
    """How a model request is tried again."""
    first_run: str | None = None
    """The line a first run said (the starter set, and the preset when it applied)."""
    local: LocalBackend | None = None
    """The embedded model (``--backend local``): checked, not loaded."""

    @property
    def generation(self) -> GenerationSettings:
        return self.plan.settings

    def plan_for(self, problems: Sequence[Problem], num_samples: int) -> Plan:
        """A plan of other problems (an evaluation split) with this run's settings."""
        return Plan(
            problems, self.generation, self.prompt, num_samples, self.settings.seed, self.choices
        )

    def header(self) -> dict[str, Any]:
        """What the run decided, as its header records it."""
        return {
            "mode": self.mode.name,
            "backend": self.backend,
            "constrain": self.choices.constrain,
            "tool_parser": self.choices.tool_parser,
            "first_run": self.first_run,
            "max_attempts": self.retry.attempts,
        }


def retry_policy(settings: RunSettings) -> RetryPolicy:
    """The retry policy of a run (``max_attempts``, ``retry_initial_s``)."""
    return RetryPolicy(attempts=settings.max_attempts, initial_s=settings.retry_initial_s)


def constrains(settings: RunSettings, mode: Mode) -> bool:
    """Whether decoding is constrained: ``--constrain on``, or ``auto`` for a mode on the
    embedded model where the measured table (docs/backends.md, The local backend) says it
    helps (`Mode.constrain_auto`)."""
    return settings.constrain == "on" or (
        settings.constrain == "auto" and runs_in_process(settings.backend) and mode.constrain_auto
    )


def tool_parser(settings: RunSettings, local: LocalBackend | None) -> tuple[str | None, str]:
    """The family parser ``--tool-parser`` (auto: the embedded model's chat template, else the
    model's name) chose, and the line that says so."""
    template = local.local.template or local.local.info.chat_template if local else None
    choice = choose_parser(settings.tool_parser, template, settings.model)
    return choice.parser, f"tool parser: {choice.describe()}"


@dataclass(frozen=True)
class _Named:
    """The mode, its prompt and the problems some settings name, each read once."""

    mode: Mode
    prompt: str
    problems: Sequence[Problem]

    @classmethod
    def read(cls, settings: RunSettings, before: _Named | None = None) -> _Named:
        """What ``settings`` name, each a mistake refused before any server is asked;
        what ``before`` read for the same names is taken from it."""
        if before is not None and before.mode.name == settings.mode:
            mode, prompt = before.mode, before.prompt
        else:
            mode = get_mode(settings.mode)
            prompt = load_prompt(settings.mode, settings.prompts_dir)
        problems = load_problems(
            settings.problems, limit=settings.limit, problem_ids=settings.problem_ids
        )
        return cls(mode, prompt, problems)


async def prepare(
    settings: RunSettings, say: Say = lambda _: None, *, in_process: bool = True
) -> RunSetup:
    """Decide the run ``settings`` describe; each decision is said once through ``say``.

    Refused before any server is asked: an unknown mode, a missing prompt, unreadable
    problems. Then ``--backend auto`` finds out whether the embedded model runs
    (`tracegen.llm.factory.choose_backend`), and `decide` does the rest. ``in_process``:
    whether episodes run in this process, where the embedded model can serve them.
    """
    named = _Named.read(settings)
    settings = await choose_backend(settings, say)
    return _decide(settings, say, in_process=in_process, named=named)


def decide(
    settings: RunSettings, say: Say = lambda _: None, *, in_process: bool = True
) -> RunSetup:
    """The run of ``settings`` whose backend needs no finding out (a kind named, or a policy
    sampled outside tracegen): `prepare` without asking any server."""
    return _decide(settings, say, in_process=in_process, named=_Named.read(settings))


def _decide(settings: RunSettings, say: Say, *, in_process: bool, named: _Named) -> RunSetup:
    said: str | None = None
    if starts_small(settings):
        update, said = first_run(settings)
        settings = settings.model_copy(update=update)
        named = _Named.read(settings, named)
        say(said)
    mode, prompt, problems = named.mode, named.prompt, named.problems
    embedded = runs_in_process(settings.backend)
    if embedded and not in_process:
        raise ConfigError(
            f"--executor {settings.executor} runs episodes in other processes, which cannot "
            "use the model --backend local runs in this one: give --host a model server "
            "(Ollama, vLLM, SGLang, llama.cpp's server) or use --executor local"
        )
    local = local_backend(settings) if embedded else None
    parser: str | None = None
    if mode.reads_tool_calls:
        parser, line = tool_parser(settings, local)
        say(line)
    choices = Choices(constrain=constrains(settings, mode), tool_parser=parser)
    plan = Plan(
        problems, settings.generation(), prompt, settings.num_samples, settings.seed, choices
    )
    return RunSetup(
        settings=settings,
        mode=mode,
        prompt=prompt,
        problems=problems,
        plan=plan,
        backend=settings.backend,
        capabilities=known_capabilities(settings.backend),
        choices=choices,
        retry=retry_policy(settings),
        first_run=said,
        local=local,
    )
