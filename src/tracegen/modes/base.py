"""The contract between the runner and the modes.

A mode owns the conversation of one episode and returns a `Trace`. It never writes files
and never speaks HTTP: it has a `Backend` and a `CodeRunner`. When the backend gives up
(a `BackendError` after its retries), the mode returns the trace so far with ``error`` set
(kind ``backend``); limits hit are failures of kind ``limit``.
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
