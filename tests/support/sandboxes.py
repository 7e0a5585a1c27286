"""The isolations the sandbox tests run under, their short limits, and a check for the
processes a sandbox may have left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.system_tools import NEEDS_BWRAP
from tracegen.sandbox import SandboxLimits
from tracegen.sandbox.isolation import judge_uid, process_uids
from tracegen.schema import ExecResult

ISOLATIONS = [pytest.param("bwrap", marks=NEEDS_BWRAP), "builtin", "rlimit"]
"""Every isolation, as test parameters: bubblewrap's tests skip where it is missing."""
EACH_ISOLATION = [
    pytest.param("bwrap", marks=[NEEDS_BWRAP, pytest.mark.slow]),
    pytest.param("builtin"),
    pytest.param("rlimit", marks=pytest.mark.slow),
]
"""`ISOLATIONS` for the fast tier: tracegen's own isolation (``builtin``) only; the slow
tier runs bubblewrap and rlimit-only too."""
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


def passed_tests(result: ExecResult) -> list[str]:
    """The names of the tests ``result`` says passed."""
    return [t.name for t in result.tests if t.passed]
