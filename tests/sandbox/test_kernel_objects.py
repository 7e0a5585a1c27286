"""Kernel objects an execution must neither keep nor share (SysV shared memory, message
queues, semaphores), and kernel surface it must not reach (new namespaces, unix sockets),
while threads, fork and subprocess keep working. tracegen's own user; see
``test_unprivileged_kernel_objects.py`` for a user without root."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import pytest

from tests.support import kernel_objects as k
from tests.support.sandboxes import EACH_ISOLATION, LIMITS, sandbox_processes
from tests.support.system_tools import NEEDS_BWRAP
from tracegen.sandbox import Sandbox
from tracegen.schema import ExecResult

NO_FILTER_UNDER_RLIMIT = pytest.mark.xfail(
    reason="rlimit-only applies no seccomp filter (docs/sandbox.md)", strict=False
)
FILTERED = [
    pytest.param("bwrap", marks=[NEEDS_BWRAP, pytest.mark.slow]),
    pytest.param("builtin"),
    pytest.param("rlimit", marks=[NO_FILTER_UNDER_RLIMIT, pytest.mark.slow]),
]
IPC_LIMITS = LIMITS.model_copy(update={"memory_mb": 512, "timeout_s": 20, "cpu_s": 20})
"""Room for one 200 MB segment at a time, and time to fill three."""


async def _shmem_settles(at_most_mb: int) -> int:
    """The host's shared memory once back under ``at_most_mb`` (a namespace is freed a
    moment after its last process), or as it is after 10 s."""
    for _ in range(100):
        if (now := k.shmem_mb()) <= at_most_mb:
            return now
        await asyncio.sleep(0.1)
    return k.shmem_mb()


@pytest.fixture(params=EACH_ISOLATION)
async def roomy(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with Sandbox(request.param, limits=IPC_LIMITS, concurrency=2) as box:
        yield box
    assert sandbox_processes() == []


async def test_shared_memory_left_behind_is_freed_and_bounded(roomy: Sandbox) -> None:
    before = k.shmem_mb()
    left = await roomy.run_code(k.SHM_LEFT)
    assert left.status == "ok", left.error
    made = json.loads(left.stdout)
    # As root every isolation bounds it to the memory limit: two segments of 200 MB, not three.
    assert 1 <= len(made) == (512 // k.SHM_MB if os.geteuid() == 0 else 3)
    after = await _shmem_settles(before + k.SHM_MB // 2)
    assert after <= before + k.SHM_MB // 2, f"Shmem {before} MB -> {after} MB"
    found = await roomy.run_code(k.SHM_READ)
    assert (found.status, json.loads(found.stdout)) == ("ok", None)


async def test_message_queues_and_semaphores_left_behind_are_gone(roomy: Sandbox) -> None:
    left = await roomy.run_code(k.QUEUE_LEFT)
    assert (left.status, json.loads(left.stdout)) == ("ok", [True, True])
    found = await roomy.run_code(k.QUEUE_READ)
    assert (found.status, json.loads(found.stdout)) == ("ok", ["", -1])


async def test_executions_at_once_do_not_share_shared_memory(roomy: Sandbox) -> None:
    writer = (
        "import ctypes, time\nlibc = ctypes.CDLL(None)\nlibc.shmat.restype = ctypes.c_void_p\n"
        "shmid = libc.shmget(0x7ACE1, 4096, 0o1666)\n"
        "ctypes.memset(libc.shmat(shmid, None, 0), 0x5A, 1)\nprint(shmid)\ntime.sleep(0.8)\n"
    )

    async def read_meanwhile() -> ExecResult:
        await asyncio.sleep(0.3)
        return await roomy.run_code(k.SHM_READ)

    written, found = await asyncio.gather(roomy.run_code(writer), read_meanwhile())
    assert (written.status, int(written.stdout) >= 0) == ("ok", True), written.error
    assert (found.status, json.loads(found.stdout)) == ("ok", None)


@pytest.mark.parametrize("flavour", FILTERED)
async def test_new_namespaces_and_unix_sockets_are_refused(flavour: str) -> None:
    async with Sandbox(flavour, limits=LIMITS) as sandbox:
        result = await sandbox.run_code(k.DENIALS)
    assert result.status == "ok", result.error
    outcomes = json.loads(result.stdout)
    assert sorted(outcomes) == sorted(k.DENIED)
    allowed = {name: how for name, how in outcomes.items() if how != "Operation not permitted"}
    assert allowed == {}


async def test_threads_fork_and_subprocess_still_work_under_the_filter(sandbox: Sandbox) -> None:
    result = await sandbox.run_code(k.ORDINARY)
    assert result.status == "ok", result.error
    expected = k.ORDINARY_OUT
    if sandbox.isolation == "rlimit":  # no filter: clone3 is the kernel's, refusing no memory
        expected = {**expected, "clone3": json.loads(result.stdout)["clone3"]}
    assert json.loads(result.stdout) == expected
