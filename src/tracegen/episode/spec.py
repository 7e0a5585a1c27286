"""The contract between the runner and the modes.

A mode owns the conversation of one episode and returns a `Trace`. It never writes files
and never speaks HTTP: it has a `Backend` and a `CodeRunner`. When the backend gives up
(a `BackendError` after its retries), the mode returns the trace so far with ``error`` set
(kind ``backend``, reason from the exception class: ``overloaded``, ``timeout``,
``server_error``, ``protocol_error``, ``unavailable``…), except for `ModelNotFound`,
`AuthError` and `BadRequest`, which no other episode would survive either: those propagate
so the runner stops the run with a clear message. Limits hit (``max_iterations``,
``max_steps``, ``max_tokens``, ``repetition``) are failures of kind ``limit``, two
unreadable tool calls in a row one of kind ``parse``; such traces are complete records.

``Trace.logprobs`` has one `TurnLogprobs` per assistant message. In inline-tools, whose one
assistant message grows over several requests, its tokens are those of every continuation
in order; text the system inserts (``<tool_response>``, a closing tag a stop sequence
removed) has no tokens. ``logprobs_status`` is ``absent`` when any completion came back
without logprobs, ``present`` when every one had them, ``not_requested`` when no model turn
completed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tracegen.config import GenerationSettings
from tracegen.llm.base import Backend
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Problem, Trace


@dataclass(frozen=True)
class Episode:
    """Everything one episode needs; built by the runner."""

    problem: Problem
    sample: int
    trace_id: str
    settings: GenerationSettings
    settings_hash: str
    system_prompt: str
    seed: int | None
    backend: Backend
    sandbox: CodeRunner


class Mode(Protocol):
    """One conversation protocol, selected with ``tracegen run --mode NAME``."""

    name: str

    async def run(self, episode: Episode) -> Trace: ...
