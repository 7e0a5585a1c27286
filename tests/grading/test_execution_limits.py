"""The problem's limits bound the whole execution, not each process: a chain of forks
that each stay under the CPU limit is ``time`` with the CPU of all of them reported; memory
split over children (or held as shared memory) is ``memory``; right programs that start
threads and processes, or reserve address space they never touch, stay ``accepted``. As
root and as ``nobody``, under each isolation."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support.limit_programs import (
    FORK_CHAIN_CPP,
    GENEROUS,
    HOSTILE,
    HOSTILE_OUTCOMES,
    LIMITED,
    OWN_FILES,
    RIGHT_UNDER_GENEROUS,
    RIGHT_UNDER_LIMITED,
    SCRIPT_LIMITS,
    SCRIPT_STATUS,
    SCRIPTS,
    SHORT_FORK_CHAIN,
    STDCPP_SUM,
    TIGHT,
    TIGHT_SANDBOX_MB,
)
from tests.support.programs import SUM
from tests.support.sandboxes import EACH_ISOLATION, ISOLATIONS
from tests.support.system_tools import NEEDS_BWRAP, NEEDS_GPP
from tests.support.unprivileged import NEEDS_ROOT, run_script_as_nobody
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.programs import Limits, Programs
from tracegen.schema import ExecResult

pytestmark = pytest.mark.slow  # seconds of CPU each
ON_LOOP = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EACH_ISOLATION)
async def judge(request: pytest.FixtureRequest) -> AsyncIterator[ProgramJudge]:
    async with Sandbox(request.param, concurrency=2) as sandbox:
        yield ProgramJudge(Programs(sandbox))


def check_hostile(name: str, outcome: str | None, cpu_s: float | None, error: str | None) -> None:
    assert outcome == HOSTILE_OUTCOMES[name], (name, outcome, cpu_s, error)
    if name == "fork-chain" and "wall-clock" not in (error or ""):
        # The CPU of every link, not the first process's alone (on a host so loaded that
        # the wall clock ran out first, less was used).
        assert cpu_s is not None and cpu_s > 1.0, (cpu_s, error)


def summary(result: ExecResult) -> tuple[str | None, float | None, str | None]:
    return result.outcome, result.tests[0].cpu_s, result.error


@ON_LOOP
@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_work_spread_over_processes_is_held_to_the_problems_limits(
    judge: ProgramJudge, name: str
) -> None:
    outcome, cpu_s, error = summary(await judge.judge(LIMITED, HOSTILE[name], "python"))
    check_hostile(name, outcome, cpu_s, error)


@ON_LOOP
@pytest.mark.parametrize("name", sorted(OWN_FILES))
async def test_files_held_in_its_own_file_systems_are_memory_wherever_it_is(
    judge: ProgramJudge, name: str
) -> None:
    if judge.programs.isolation == "rlimit":
        pytest.skip("rlimit: an execution has no file system of its own to count")
    outcome, cpu_s, error = summary(await judge.judge(LIMITED, OWN_FILES[name], "python"))
    assert outcome == "memory", (name, outcome, cpu_s, error)


@ON_LOOP
@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_in_one_execution_per_program_too(judge: ProgramJudge, name: str) -> None:
    """`JudgeOptions(batch=True)`: a test whose run there used more is run again alone."""
    batched = ProgramJudge(judge.programs, JudgeOptions(batch=True))
    result = await batched.judge(SUM, HOSTILE[name], "python")
    check_hostile(name, result.outcome, result.tests[0].cpu_s, result.error)


@ON_LOOP
async def test_a_run_in_one_execution_per_program_counts_every_process(
    judge: ProgramJudge,
) -> None:
    built = await judge.programs.build(SHORT_FORK_CHAIN, "python")
    limits = Limits(cpu_s=1, wall_s=5, memory_mb=64, output_bytes=1 << 16)
    runs = await judge.programs.run_batch(built, [b"2 3\n", b"10 20\n"], limits, 1 << 16)
    assert runs, "the batch failed"
    assert runs[0].cpu_s > 1.0 or runs[0].killed_for is not None, runs[0]


@ON_LOOP
@NEEDS_GPP
async def test_a_cpp_fork_chain_is_time_with_the_cpu_of_every_link(judge: ProgramJudge) -> None:
    outcome, cpu_s, error = summary(await judge.judge(LIMITED, FORK_CHAIN_CPP, "cpp"))
    check_hostile("fork-chain", outcome, cpu_s, error)


@ON_LOOP
@pytest.mark.parametrize("name", sorted(RIGHT_UNDER_LIMITED))
async def test_threads_and_reserved_address_space_are_not_memory(
    judge: ProgramJudge, name: str
) -> None:
    result = await judge.judge(LIMITED, RIGHT_UNDER_LIMITED[name], "python")
    assert result.outcome == "accepted", (result.error, result.tests)


@ON_LOOP
@pytest.mark.parametrize("name", sorted(RIGHT_UNDER_GENEROUS))
async def test_right_programs_with_workers_are_accepted(judge: ProgramJudge, name: str) -> None:
    result = await judge.judge(GENEROUS, RIGHT_UNDER_GENEROUS[name], "python")
    assert result.outcome == "accepted", (result.error, result.tests)


@ON_LOOP
@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_a_sandboxs_memory_limit_counts_every_process_of_a_script(isolation: str) -> None:
    async with Sandbox(isolation, limits=SandboxLimits(**SCRIPT_LIMITS)) as sandbox:
        for name, code in SCRIPTS.items():
            result = await sandbox.run_code(code)
            assert result.status == SCRIPT_STATUS[name], (name, result.error, result.stderr)


ISOLATED = [pytest.param("bwrap", marks=NEEDS_BWRAP), "builtin"]


@NEEDS_GPP
@ON_LOOP
@pytest.mark.parametrize("isolation", ISOLATED)
async def test_a_compile_has_its_own_memory_limit_not_the_problems_nor_the_sandboxs(
    isolation: str,
) -> None:
    limits = SandboxLimits(memory_mb=TIGHT_SANDBOX_MB)
    async with Sandbox(isolation, limits=limits) as sandbox:
        result = await ProgramJudge(Programs(sandbox)).judge(TIGHT, STDCPP_SUM, "cpp")
    assert result.outcome == "accepted", (result.error, result.tests)


NOBODY_IMPORTS = """
import asyncio, concurrent.futures.thread, json, shutil
from tests.support.limit_programs import (
    FORK_CHAIN_CPP,
    GENEROUS, HOSTILE, LIMITED, OWN_FILES, RIGHT_UNDER_GENEROUS, RIGHT_UNDER_LIMITED,
    SCRIPT_LIMITS, SCRIPTS,
)
from tests.support.programs import SUM
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.programs import Limits, Programs
"""
NOBODY_SCRIPT = """
async def main():
    out = {{}}
    async with Sandbox({isolation!r}, concurrency=2) as sandbox:
        judge = ProgramJudge(Programs(sandbox))
        cases = [(n, LIMITED, c) for n, c in {{**HOSTILE, **OWN_FILES}}.items()]
        cases += [(n, LIMITED, c) for n, c in RIGHT_UNDER_LIMITED.items()]
        cases += [(n, GENEROUS, c) for n, c in RIGHT_UNDER_GENEROUS.items()]
        for name, problem, code in cases:
            result = await judge.judge(problem, code, "python")
            out[name] = [result.outcome, result.tests[0].cpu_s, result.error]
        if shutil.which("g++"):
            result = await judge.judge(LIMITED, FORK_CHAIN_CPP, "cpp")
            out["cpp:fork-chain"] = [result.outcome, result.tests[0].cpu_s, result.error]
    async with Sandbox({isolation!r}, limits=SandboxLimits(**SCRIPT_LIMITS)) as sandbox:
        for name, code in SCRIPTS.items():
            out["script:" + name] = (await sandbox.run_code(code)).status
    return out

print(json.dumps(asyncio.run(main())))
"""


@functools.cache
def as_nobody(isolation: str) -> dict[str, Any]:
    script = NOBODY_SCRIPT.format(isolation=isolation)
    return run_script_as_nobody(NOBODY_IMPORTS, script, timeout=600)


NOBODY_ISOLATIONS = ["builtin", pytest.param("bwrap", marks=NEEDS_BWRAP)]


@NEEDS_ROOT
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_as_nobody_work_spread_over_processes_is_held_to_the_limits(
    isolation: str, name: str
) -> None:
    check_hostile(name, *as_nobody(isolation)[name])


@NEEDS_ROOT
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
@pytest.mark.parametrize("name", sorted(OWN_FILES))
def test_as_nobody_files_held_in_its_own_file_systems_are_memory_wherever_it_is(
    isolation: str, name: str
) -> None:
    assert as_nobody(isolation)[name][0] == "memory", as_nobody(isolation)[name]


@NEEDS_ROOT
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
@pytest.mark.parametrize("name", sorted({**RIGHT_UNDER_LIMITED, **RIGHT_UNDER_GENEROUS}))
def test_as_nobody_right_programs_with_threads_and_workers_are_accepted(
    isolation: str, name: str
) -> None:
    assert as_nobody(isolation)[name][0] == "accepted", as_nobody(isolation)[name]


@NEEDS_ROOT
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_as_nobody_a_sandboxs_memory_limit_counts_every_process(isolation: str, name: str) -> None:
    assert as_nobody(isolation)["script:" + name] == SCRIPT_STATUS[name]


@NEEDS_ROOT
@NEEDS_GPP
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
def test_as_nobody_a_cpp_fork_chain_is_time(isolation: str) -> None:
    check_hostile("fork-chain", *as_nobody(isolation)["cpp:fork-chain"])


COMPILE_SCRIPT = """
from tests.support.limit_programs import STDCPP_SUM, TIGHT, TIGHT_SANDBOX_MB

async def main():
    limits = SandboxLimits(memory_mb=TIGHT_SANDBOX_MB)
    async with Sandbox({isolation!r}, limits=limits) as sandbox:
        result = await ProgramJudge(Programs(sandbox)).judge(TIGHT, STDCPP_SUM, "cpp")
    return [result.outcome, result.error]

print(json.dumps(asyncio.run(main())))
"""


@NEEDS_ROOT
@NEEDS_GPP
@pytest.mark.parametrize("isolation", NOBODY_ISOLATIONS)
def test_as_nobody_a_compile_has_its_own_memory_limit(isolation: str) -> None:
    script = COMPILE_SCRIPT.format(isolation=isolation)
    assert run_script_as_nobody(NOBODY_IMPORTS, script, timeout=600) == ["accepted", None]
