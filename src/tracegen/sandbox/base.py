"""What the rest of tracegen may ask of the sandbox. Implementation: `tracegen.sandbox.runner`."""

from __future__ import annotations

import math
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from tracegen.schema import ExecResult, Problem

IsolationName = Literal["bwrap", "builtin", "rlimit"]


class SandboxLimits(BaseModel):
    """Limits applied to every execution."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = 10.0
    cpu_s: int = 10
    """CPU seconds of all the execution's processes together, ended ones included."""
    memory_mb: int = 1024
    """What the execution holds in all (every process, its shared memory, its tmpfs), not
    the address space its processes reserve (docs/sandbox.md, "Limits of an execution")."""
    file_size_mb: int = 16
    processes: int = 64
    """Processes and threads (``RLIMIT_NPROC`` counts each thread): a program's pool of
    workers or its few dozen threads fit."""
    open_files: int = 64
    output_bytes: int = 64_000

    @classmethod
    def for_timeout(cls, timeout_s: float) -> SandboxLimits:
        """The limits of ``--exec-timeout``: that much wall clock, and CPU time to match."""
        return cls(timeout_s=timeout_s, cpu_s=math.ceil(timeout_s))


class CodeRunner(Protocol):
    """Runs untrusted code in a fresh, limited child; never raises for anything the code does."""

    isolation: IsolationName

    async def run_tests(self, code: str, problem: Problem) -> ExecResult:
        """Run ``problem.setup`` + ``code``, then each of ``problem.tests`` separately."""
        ...

    async def run_code(self, code: str) -> ExecResult:
        """Run a script (a tool call) and capture its output; ``tests`` stays empty."""
        ...


class IsolationInfo(BaseModel):
    """Which isolation executions get, in words a user can read; ``warning`` if it is partial.

    ``network_isolated``: generated code reaches no network, loopback included;
    ``filesystem_isolated``: it writes only in its own directory and reads only the system.
    """

    model_config = ConfigDict(frozen=True)

    name: IsolationName
    detail: str
    warning: str | None = None
    network_isolated: bool = False
    filesystem_isolated: bool = False
    bwrap_problem: str | None = None
    """Why bubblewrap is not used (``auto`` fell back to the built-in isolation)."""
