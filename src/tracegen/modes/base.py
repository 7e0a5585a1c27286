"""The contract of a mode, and the base every shipped mode builds on.

A mode owns the conversation of one episode and returns a `Trace`. It never writes files
and never speaks HTTP: it has a `Backend` and a `CodeRunner`. When the backend gives up
(a `BackendError` after its retries), the mode returns the trace so far with ``error`` set
(kind ``backend``, reason from the exception class: ``overloaded``, ``timeout``,
``server_error``, ``protocol_error``, ``unavailable``…), except for the errors no other
episode would survive either (``stops == "run"`` in `tracegen.errors`: `ModelNotFound`,
`AuthError`, `BadRequest`…): those propagate so the run stops with a clear message. Limits
hit (``max_iterations``, ``max_steps``, ``max_tokens``, ``repetition``) are failures of kind
``limit``, two unreadable tool calls in a row one of kind ``parse``; such traces are complete
records.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

from tracegen.episode.assembly import assemble
from tracegen.episode.limits import EpisodeEnded, backend_failure
from tracegen.episode.session import Session
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import BackendError
from tracegen.llm.base import Backend
from tracegen.llm.grammar import Grammar
from tracegen.parsing.program import defines
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Trace, TraceError


class Mode(Protocol):
    """One conversation protocol, selected with ``tracegen run --mode NAME``."""

    name: ClassVar[str]
    continues_message: ClassVar[bool]
    """Whether it continues a partial assistant message (``--continuation`` must work)."""
    constrain_auto: ClassVar[bool]
    """Whether ``--constrain auto`` constrains this mode on the embedded model."""
    reads_tool_calls: ClassVar[bool]
    """Whether it reads tool calls the model writes as text (``--tool-parser`` applies)."""

    async def run(self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner) -> Trace: ...


class TracedMode(ABC):
    """A mode built on `Session`: it writes only its protocol (``converse``), where its final
    program is (``final_code``) and its structure criteria (``structure_ok``)."""

    name: ClassVar[str]
    continues_message: ClassVar[bool] = False
    default_think: ClassVar[bool | None] = None
    """Server-side thinking when the ``think`` setting is unset (None: not sent, the server
    decides)."""
    grammar: ClassVar[Grammar | None] = None
    """One model turn of the protocol as a grammar (`tracegen.modes.grammars`), used when
    decoding is constrained; None: the mode is never constrained."""
    constrain_auto: ClassVar[bool] = False
    reads_tool_calls: ClassVar[bool] = False
    """Whether ``--constrain auto`` constrains this mode on the embedded model: where the
    measured table in docs/backends.md (The local backend) shows the grammar helps."""

    async def run(self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner) -> Trace:
        think = spec.settings.think
        session = Session(spec, backend, sandbox, self.default_think if think is None else think)
        error: TraceError | None = None
        try:
            await self.converse(session)
        except EpisodeEnded as e:
            error = e.error
        except BackendError as e:
            if e.stops == "run":
                raise
            error = backend_failure(e)
        return await assemble(session, self, error)

    @abstractmethod
    async def converse(self, session: Session) -> None:
        """Hold the conversation; raise `EpisodeEnded` to stop early."""

    @abstractmethod
    def structure_ok(self, trace: Trace) -> bool:
        """The mode's structure criteria for ``is_ideal`` (docs/modes.md); an episode
        with an error or stripped text never meets them."""

    def final_code(self, session: Session) -> str | None:
        """The program that is scored: by default the model's last code block, else the last
        script it ran that defines the entry point."""
        code = session.transcript.model_code()
        if code:
            return code[-1]
        entry = session.problem.entry_point
        return next((c for c in reversed(session.runs.executed) if defines(c, entry)), None)
