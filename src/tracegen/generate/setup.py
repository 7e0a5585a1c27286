"""`prepare(settings) -> RunSetup`: a run decided once, before anything runs.

Every entry point — `tracegen run`, the Ray executor's actors, the Atropos and TRL
environments, a library user — starts from the same frozen `RunSetup`: the mode, its system
prompt, the problems and the plan; the backend kind, the model and what the kind can do; what
the run decided (`tracegen.episode.spec.Choices`: constrained decoding, the tool-call parser);
a first run's starter set and preset; the retry policy. Decisions are recorded here and said
in the run's header, never written back into the settings (which stay as given): the plan,
every episode's spec and the host pool read the decided values from here. Episodes then run
through `tracegen.generate.worker.EpisodeWorker`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tracegen.config import GenerationSettings, RunSettings
from tracegen.data.prompts import load_prompt
from tracegen.episode.spec import Choices
from tracegen.errors import ConfigError
from tracegen.generate.first_run import first_run, starts_small
from tracegen.generate.plan import Plan
from tracegen.llm.base import Capabilities
from tracegen.llm.factory import (
    BackendChoice,
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
    """The settings as given, never changed: what the run decided instead of them (the
    backend kind and model, a first run's problems and preset) is recorded here — read
    `backend`, `model`, `generation`, `problem_set` and ``plan.num_samples``, not the
    settings' fields of the same names."""
    mode: Mode
    prompt: str
    """The mode's system prompt, as sent."""
    problems: Sequence[Problem]
    problem_set: str
    """Where the problems come from (``--problems``, or a first run's starter set)."""
    plan: Plan
    """The episodes, with the generation settings the run decided (`generation`)."""
    backend: str
    """The backend kind: local, ollama, openai; auto until a server answers (`answered`
    then records the kind the pool found)."""
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
        """The settings that shape the traces, as decided: what the plan hashes and every
        episode's spec carries."""
        return self.plan.settings

    @property
    def model(self) -> str:
        """The model the episodes are asked of: ``--model``, or the embedded default."""
        return self.generation.model

    @property
    def chosen(self) -> BackendChoice:
        """The backend kind and model, as `tracegen.llm.factory.open_pool` takes them."""
        return BackendChoice(self.backend, self.model)

    def plan_for(self, problems: Sequence[Problem], num_samples: int) -> Plan:
        """A plan of other problems (an evaluation split) with this run's settings."""
        return Plan(
            problems, self.generation, self.prompt, num_samples, self.settings.seed, self.choices
        )

    def answered(self, kind: str | None) -> RunSetup:
        """This setup once the servers answered: an ``auto`` backend becomes the ``kind`` they
        were found to be (`tracegen.llm.pool.HostPool.kind`), with what that kind can do."""
        if self.backend != "auto" or kind is None or kind == self.backend:
            return self
        return replace(self, backend=kind, capabilities=known_capabilities(kind))

    def header(self) -> dict[str, Any]:
        """What the run decided, as its header records it: the state file's first line
        (``run``, `tracegen.generate.runfiles.StateHeader`) and the run's opening line."""
        return {
            "mode": self.mode.name,
            "backend": self.backend,
            "model": self.model,
            "problems": self.problem_set,
            "constrain": self.choices.constrain,
            "tool_parser": self.choices.tool_parser,
            "first_run": self.first_run,
            "max_attempts": self.retry.attempts,
        }


def describe(header: dict[str, Any]) -> str:
    """A run's `RunSetup.header` as its opening line says it."""
    said = [f"{key} {header[key]}" for key in ("mode", "backend", "model", "problems")]
    if header.get("first_run"):
        said.append("first run")
    return " · ".join(said)


def retry_policy(settings: RunSettings) -> RetryPolicy:
    """The retry policy of a run (``max_attempts``, ``retry_initial_s``)."""
    return RetryPolicy(attempts=settings.max_attempts, initial_s=settings.retry_initial_s)


def constrains(settings: RunSettings, mode: Mode, backend: str) -> bool:
    """Whether decoding is constrained: ``--constrain on``, or ``auto`` for a mode on the
    embedded model (the ``backend`` kind decided) where the measured table (docs/backends.md,
    The local backend) says it helps (`Mode.constrain_auto`)."""
    return settings.constrain == "on" or (
        settings.constrain == "auto" and runs_in_process(backend) and mode.constrain_auto
    )


def tool_parser(
    settings: RunSettings, model: str, local: LocalBackend | None
) -> tuple[str | None, str]:
    """The family parser ``--tool-parser`` (auto: the embedded model's chat template, else the
    ``model``'s name) chose, and the line that says so."""
    template = local.local.template or local.local.info.chat_template if local else None
    choice = choose_parser(settings.tool_parser, template, model)
    return choice.parser, f"tool parser: {choice.describe()}"


@dataclass(frozen=True)
class Named:
    """The mode, its prompt and the problems some settings name, each read once: the part of
    a run's setup no server takes part in, which `prepare` and `decide` start from, and which
    an environment whose policy is sampled elsewhere (`tracegen.trl.environment`) reads alone."""

    mode: Mode
    prompt: str
    problems: Sequence[Problem]

    @classmethod
    def read(
        cls,
        settings: RunSettings,
        mode_name: str,
        problem_set: str,
        before: Named | None = None,
    ) -> Named:
        """The mode and problems named (as given or decided), each a mistake refused before
        any server is asked; what ``before`` read for the same mode is taken from it."""
        if before is not None and before.mode.name == mode_name:
            mode, prompt = before.mode, before.prompt
        else:
            mode = get_mode(mode_name)
            prompt = load_prompt(mode_name, settings.prompts_dir)
        problems = load_problems(
            problem_set, limit=settings.limit, problem_ids=settings.problem_ids
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
    named = Named.read(settings, settings.mode, settings.problems)
    chosen = await choose_backend(settings, say)
    return _decide(settings, chosen, say, in_process=in_process, named=named)


def decide(
    settings: RunSettings,
    say: Say = lambda _: None,
    *,
    in_process: bool = True,
    sampled_elsewhere: bool = False,
) -> RunSetup:
    """The run of ``settings`` whose backend needs no finding out (a kind named, or a policy
    sampled outside tracegen): `prepare` without asking any server. ``sampled_elsewhere``: the
    caller samples the policy itself, so nothing constrains its decoding (no grammar is asked
    for, whatever ``--constrain`` says)."""
    named = Named.read(settings, settings.mode, settings.problems)
    return _decide(
        settings,
        BackendChoice(settings.backend, settings.model),
        say,
        in_process=in_process,
        named=named,
        sampled_elsewhere=sampled_elsewhere,
    )


def _decide(
    settings: RunSettings,
    chosen: BackendChoice,
    say: Say,
    *,
    in_process: bool,
    named: Named,
    sampled_elsewhere: bool = False,
) -> RunSetup:
    said: str | None = None
    decided: dict[str, Any] = {"model": chosen.model}
    if starts_small(settings, chosen):
        update, said = first_run(settings)
        decided |= update
        say(said)
    problem_set = decided.pop("problems", settings.problems)
    num_samples = decided.pop("num_samples", settings.num_samples)
    generation = settings.generation(**decided)
    if said is not None:
        named = Named.read(settings, generation.mode, problem_set, named)
    mode, prompt, problems = named.mode, named.prompt, named.problems
    embedded = runs_in_process(chosen.backend)
    if embedded and not in_process:
        raise ConfigError(
            f"--executor {settings.executor} runs episodes in other processes, which cannot "
            "use the model --backend local runs in this one: give --host a model server "
            "(Ollama, vLLM, SGLang, llama.cpp's server) or use --executor local"
        )
    local = local_backend(settings, chosen.model) if embedded else None
    parser: str | None = None
    if mode.reads_tool_calls:
        parser, line = tool_parser(settings, chosen.model, local)
        say(line)
    constrain = not sampled_elsewhere and constrains(settings, mode, chosen.backend)
    choices = Choices(constrain=constrain, tool_parser=parser)
    plan = Plan(problems, generation, prompt, num_samples, settings.seed, choices)
    return RunSetup(
        settings=settings,
        mode=mode,
        prompt=prompt,
        problems=problems,
        problem_set=problem_set,
        plan=plan,
        backend=chosen.backend,
        capabilities=known_capabilities(chosen.backend),
        choices=choices,
        retry=retry_policy(settings),
        first_run=said,
        local=local,
    )
