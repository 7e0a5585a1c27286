"""A sample never changes the verdict of another: a hostile one that fills its temporary
space, storms forks, hogs memory, signals every process it can or takes the names of later
executions' directories runs beside right ones, which still pass, as does the next one.
tracegen's own user; `test_unprivileged_siblings.py` runs them as a user without root."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.forgeries import SQUARE
from tests.support.sandboxes import sandbox_processes
from tests.support.siblings import HOSTILE, LIMITS, RIGHT
from tests.support.system_tools import NEEDS_BWRAP
from tracegen.sandbox import Sandbox
from tracegen.sandbox.isolation import judge_uid

pytestmark = pytest.mark.slow  # each hostile sample runs for seconds
ISOLATED = [pytest.param("bwrap", marks=NEEDS_BWRAP), "builtin"]
"""rlimit-only gives an execution no temporary space of its own (docs/sandbox.md)."""


@pytest.mark.parametrize("hostile", list(HOSTILE))
@pytest.mark.parametrize("flavour", ISOLATED)
async def test_a_hostile_sibling_does_not_change_a_right_verdict(
    flavour: str, hostile: str
) -> None:
    async with Sandbox(flavour, limits=LIMITS, concurrency=3) as sandbox:

        async def right_meanwhile() -> list:
            await asyncio.sleep(1.5)
            return await asyncio.gather(*(sandbox.run_tests(RIGHT, SQUARE) for _ in range(2)))

        _, rights = await asyncio.gather(sandbox.run_code(HOSTILE[hostile]), right_meanwhile())
        after = await sandbox.run_tests(RIGHT, SQUARE)
    results = [*rights, after]
    assert [r.status for r in results] == ["ok"] * 3, [(r.error, r.stderr) for r in results]
    assert sandbox_processes() == []


def _zygote_processes() -> list[int]:
    """The zygotes of this process's sandboxes and what they forked but executions (their
    command line names this process's judges' uid), never another process's."""
    marker, found = b'"judge_uid": %d' % judge_uid(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                command = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if b"tracegen.sandbox._zygote" in command and marker in command:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("flavour", ISOLATED)
async def test_a_zygote_that_stops_answering_is_replaced(flavour: str) -> None:
    limits = LIMITS.model_copy(update={"timeout_s": 1.0})
    async with Sandbox(flavour, limits=limits, concurrency=1) as sandbox:
        assert (await sandbox.run_tests(RIGHT, SQUARE)).status == "ok"
        stopped = _zygote_processes()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        lost = await sandbox.run_tests(RIGHT, SQUARE)
        later = [await sandbox.run_tests(RIGHT, SQUARE) for _ in range(2)]
    assert stopped
    assert lost.status == "error"
    assert [r.status for r in later] == ["ok", "ok"], [r.error for r in later]
    assert not set(stopped) & set(_zygote_processes())
