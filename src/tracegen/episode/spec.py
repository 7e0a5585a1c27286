"""What one episode is: a problem, a sample, the settings that shape it. Picklable, so any
executor (the local executor, a Ray actor, a library user) can hand it to `run_episode`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracegen.config import GenerationSettings
from tracegen.schema import Problem, Trace, TraceError

Key = tuple[str, int, str, str]
"""What resume matches on: (problem id, sample, mode, model)."""


@dataclass(frozen=True)
class Choices:
    """What a run decided when it started (`tracegen.generate.setup.prepare`), beside the
    settings it was given: never written back into them."""

    constrain: bool = False
    """Whether decoding is constrained to the mode's grammar (``--constrain`` on, or auto
    where it helps the embedded model)."""
    tool_parser: str | None = None
    """The family of tool calls written as text that ``--tool-parser auto`` chose (None:
    not chosen; the mode decides from the model's name)."""


@dataclass(frozen=True)
class EpisodeSpec:
    """Everything an episode needs except the backend and the sandbox it runs on."""

    problem: Problem
    sample: int
    trace_id: str
    settings: GenerationSettings
    settings_hash: str
    system_prompt: str
    seed: int | None
    choices: Choices = Choices()

    @property
    def key(self) -> Key:
        return (self.problem.id, self.sample, self.settings.mode, self.settings.model)

    def identity(self) -> dict[str, Any]:
        """The fields that say which episode a trace is: the one place they are set."""
        return {
            "id": self.trace_id,
            "problem_id": self.problem.id,
            "sample": self.sample,
            "mode": self.settings.mode,
            "model": self.settings.model,
            "settings_hash": self.settings_hash,
        }

    def failed(self, error: TraceError) -> Trace:
        """The record of an episode that failed before it had a conversation to keep."""
        return Trace(**self.identity(), error=error)
