"""The cases of ``test_siblings.py`` and ``test_shared_state.py`` for a user without root:
tracegen run as uid ``nobody`` (one uid for tracegen, its zygote and every execution) under
bwrap and builtin, once per isolation, each test reading one property off that run."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.support import shared_state as s
from tests.support.siblings import HOSTILE
from tests.support.system_tools import NEEDS_BWRAP
from tests.support.unprivileged import NEEDS_ROOT, run_script_as_nobody

pytestmark = [
    NEEDS_ROOT,
    s.NEEDS_CHANNEL,
    pytest.mark.slow,  # tracegen started as another user, hostile samples running for seconds
]

IMPORTS = """
import asyncio, concurrent.futures.thread, json, os
from tests.support import shared_state as s
from tests.support.forgeries import SQUARE
from tests.support.siblings import HOSTILE, LIMITS, RIGHT
from tracegen.sandbox import Sandbox
atime_before = s.stale_atime(s.ATIME_FILES[1])  # as root: nobody may not set it
"""
SCRIPT = r"""

os.chdir("/")

async def main():
    out = {{"siblings": {{}}}}
    async with Sandbox({isolation!r}, limits=LIMITS, concurrency=3) as sandbox:
        for name, code in HOSTILE.items():
            async def right_meanwhile():
                await asyncio.sleep(1.5)
                return await asyncio.gather(*(sandbox.run_tests(RIGHT, SQUARE) for _ in range(2)))
            _, rights = await asyncio.gather(sandbox.run_code(code), right_meanwhile())
            after = await sandbox.run_tests(RIGHT, SQUARE)
            out["siblings"][name] = [[r.status, r.error] for r in [*rights, after]]
        r = await sandbox.run_code(s.PROBES)
        out["probes"] = json.loads(r.stdout) if r.status == "ok" else r.error
        r = await sandbox.run_code(s.ORDINARY)
        out["ordinary"] = json.loads(r.stdout) if r.status == "ok" else r.error
        r = await sandbox.run_code(s.atime_program(s.ATIME_FILES[1]))
        read_only = json.loads(r.stdout) if r.status == "ok" else r.error
        out["atime"] = [read_only, s.ATIME_FILES[1].stat().st_atime == atime_before]
        s.evict()
        samples = []
        for _ in range(s.SAMPLES):
            samples.append((await sandbox.run_tests(s.MEMORY_ATTACK, s.HIDDEN)).status)
        out["samples"] = samples
    print(json.dumps(out))

asyncio.run(main())
"""


@functools.cache
def run_as_nobody(isolation: str) -> dict[str, Any]:
    return run_script_as_nobody(IMPORTS, SCRIPT.format(isolation=isolation), timeout=600)


ISOLATED = [pytest.param("bwrap", marks=NEEDS_BWRAP), "builtin"]


@pytest.mark.parametrize("hostile", list(HOSTILE))
@pytest.mark.parametrize("isolation", ISOLATED)
def test_a_hostile_sibling_does_not_change_a_right_verdict(isolation: str, hostile: str) -> None:
    assert run_as_nobody(isolation)["siblings"][hostile] == [["ok", None]] * 3


@pytest.mark.parametrize("isolation", ISOLATED)
def test_page_cache_locks_watches_and_ports_are_out_of_reach(isolation: str) -> None:
    assert run_as_nobody(isolation)["probes"] == s.REFUSED


@pytest.mark.parametrize("isolation", ISOLATED)
def test_sqlite_tempfile_and_locks_on_its_own_files_work(isolation: str) -> None:
    assert run_as_nobody(isolation)["ordinary"] == s.ORDINARY_OUT


@pytest.mark.parametrize("isolation", ISOLATED)
def test_identical_answer_free_samples_never_pass(isolation: str) -> None:
    assert run_as_nobody(isolation)["samples"] == ["failed"] * s.SAMPLES


@pytest.mark.parametrize("isolation", ISOLATED)
def test_reading_a_host_file_writes_no_access_time(isolation: str) -> None:
    assert run_as_nobody(isolation)["atime"] == [[True, True], True]
