"""`tracegen verify`: every solution of a file judged on an `EpisodeWorker`'s sandbox, a
bounded number at a time, verdicts given back in file order (`tracegen.views.verdict_stream`
shows them).

The file is read twice: once to check every line (a bad one is an error naming FILE:LINE
before anything runs), then lazily while the solutions run (at most `IN_FLIGHT` per sandbox
worker at a time). Each verdict comes out in file order as soon as those before it are done:
a row on the terminal, a line with ``--json`` or in ``-o``. Memory stays flat however many
solutions the file holds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from tracegen.config import RunSettings
from tracegen.errors import ConfigError, OutputError
from tracegen.generate.worker import EpisodeWorker
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.grading.verdicts import (
    Solution,
    Verdict,
    check_solutions,
    iter_solutions,
    verify_one,
)
from tracegen.jsonl import JsonlWriter, check_outputs, special_file_warning
from tracegen.problems import load_problems
from tracegen.sandbox import SandboxLimits
from tracegen.sandbox.programs import Programs
from tracegen.views.verdict_stream import VerdictDisplay

IN_FLIGHT = 4
"""Solutions started per sandbox worker before the oldest one's verdict is awaited."""


def verify_command(
    settings: RunSettings,
    *,
    solutions: Path,
    output: Path | None,
    json_out: bool,
    time_scale: float = 1.0,
    all_tests: bool = False,
) -> None:
    """Verify every solution of ``solutions`` against the problems of ``settings`` (in its
    sandbox); failing solutions are results, not errors."""
    if not 0 < time_scale <= 100:
        raise ConfigError(f"--time-scale must be within (0, 100], got {time_scale}")
    options = JudgeOptions(time_scale=time_scale, all_tests=all_tests)
    problems = settings.problems
    by_id = {p.id: p for p in load_problems(problems)}
    check_solutions(solutions, by_id, problems)
    problem_file = [Path(problems)] if Path(problems).is_file() else []
    check_outputs([solutions, *problem_file], output)
    display = VerdictDisplay(iter(by_id), json_out=json_out)
    writer = _open_output(output, display.warn) if output is not None else None
    display.start()

    def emit(verdict: Verdict) -> None:
        if writer is not None:
            writer.write(verdict)
        display.show(verdict)

    todo = iter_solutions(solutions, by_id, problems)
    try:
        asyncio.run(verify_stream(todo, settings, display.warn, emit, options))
    finally:
        if writer is not None:
            writer.close()
    display.close()


def _open_output(output: Path, warn: Callable[[str], None]) -> JsonlWriter:
    """A writer replacing ``output``; a FIFO or a device is written as it is, with a warning."""
    warning = special_file_warning(output)
    if warning is not None:
        warn(warning)
    else:
        try:
            output.unlink(missing_ok=True)
        except OSError as e:
            raise OutputError(f"{output}: cannot replace it: {e.strerror}") from None
    return JsonlWriter(output)


async def verify_stream(
    solutions: Iterator[Solution],
    settings: RunSettings,
    warn: Callable[[str], None],
    emit: Callable[[Verdict], None],
    options: JudgeOptions | None = None,
) -> None:
    """Run ``solutions`` in the sandbox of ``settings`` (``sandbox``, ``sandbox_packages``), a
    bounded number at a time; ``emit`` each verdict in file order."""
    async with EpisodeWorker(settings, limits=SandboxLimits()) as worker:
        if worker.warning:
            warn(worker.warning)
        sandbox = worker.sandbox
        judge = ProgramJudge(Programs.cached_on_disk(sandbox), options)
        window = IN_FLIGHT * sandbox.concurrency
        pending: deque[asyncio.Task[Verdict]] = deque()
        try:
            for solution in solutions:
                pending.append(asyncio.create_task(verify_one(solution, sandbox, judge)))
                if len(pending) >= window:
                    emit(await pending.popleft())
            while pending:
                emit(await pending.popleft())
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
