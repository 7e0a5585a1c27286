"""Sandboxes for every isolation, with short limits, and a check for stray processes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.isolation import judge_uid, process_uids

LIMITS = SandboxLimits(timeout_s=2.0, cpu_s=2, memory_mb=512, processes=16, output_bytes=10_000)


def sandbox_processes(pid: int | None = None, *, judges: bool = True) -> list[int]:
    """Pids of processes whose real uid is a sandbox uid of tracegen process ``pid`` (this
    process by default), zombies too; without the judges (which live as long as their
    sandbox) unless ``judges``."""
    uids = set(process_uids(pid)) - (set() if judges else {judge_uid(pid)})
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(entry.path, "status").read_text()
            except OSError:
                continue
            uid = int(status.split("\nUid:", 1)[1].split()[0])
            if uid in uids:
                pids.append(int(entry.name))
    return pids


ISOLATIONS = ["bwrap", "builtin", "rlimit"]


@pytest.fixture(params=ISOLATIONS)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []


@pytest.fixture
async def bwrap_sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox("bwrap", limits=LIMITS, concurrency=2) as box:
        yield box
