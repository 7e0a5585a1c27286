"""One episode's working parts, each with one job: the `Transcript` (what was said), the
`Turns` (asking the model, within budget), the `Runs` (executing code, within budget).
A mode holds the conversation through them; `assemble` turns them into the `Trace`."""

from __future__ import annotations

import time

from tracegen.data.prompts import task_message
from tracegen.episode.runs import Runs
from tracegen.episode.spec import EpisodeSpec
from tracegen.episode.transcript import Transcript
from tracegen.episode.turns import Turns
from tracegen.llm.base import Backend
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Metrics, Role, ToolPath


class Session:
    """The parts of one episode, sharing one set of `Metrics`."""

    def __init__(
        self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner, think: bool | None
    ) -> None:
        self.spec = spec
        self.problem = spec.problem
        self.settings = spec.settings
        self.metrics = Metrics()
        self.transcript = Transcript(spec.system_prompt, task_message(spec.problem), self.metrics)
        self.turns = Turns(spec, backend, self.transcript, self.metrics, think)
        self.runs = Runs(
            spec.problem,
            sandbox,
            self.metrics,
            spec.settings.max_iterations,
            self.transcript.language_of,
        )
        self.started = time.perf_counter()
        self.tool_path: ToolPath | None = None
        """Set by modes that give the model tools (``native-tools``)."""

    @property
    def tested(self) -> bool:
        """Whether the problem has tests to run code against (a math problem has an answer)."""
        return self.runs.tested

    def say(self, role: Role, content: str, tool_name: str | None = None) -> int:
        """A message the system writes for the model's next turn, which must be allowed (else
        the episode ends here); its index."""
        self.turns.require_turn()
        return self.transcript.add_message(role, content, tool_name)
