"""The files of the runtimes and compilers the sandbox runs (the JDK's ``libjvm.so``,
``modules`` and ``classes.jsa``, ``cc1plus``, ``libstdc++``) are never charged to an
execution's memory: the sandbox brings them into the page cache itself, outside every
execution's cgroup, so a program's first execution holds no more than its later ones (it
was charged them, 40 MB and more for a JVM, then they were evicted with its slot's cache,
and charged again to the next). As root, where the kernel offers a memory cgroup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.programs import JAVA
from tests.support.system_tools import NEEDS_BWRAP, NEEDS_JAVAC
from tracegen.sandbox import Sandbox
from tracegen.sandbox.isolation import cgroup_version, java_home
from tracegen.sandbox.programs import Limits, Programs

pytestmark = [pytest.mark.slow, NEEDS_JAVAC]  # JVMs, a compile

LIMITS = Limits(cpu_s=5, wall_s=20, memory_mb=256, output_bytes=1 << 16)
SLACK_MB = 4
"""What one JVM's start may differ from another's (its heap, its threads' stacks)."""


def jdk_files() -> list[Path]:
    home = java_home()
    assert home is not None
    return [p for p in Path(home).rglob("*") if p.is_file() and not p.is_symlink()]


def cache(paths: list[Path], advice: int) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, advice)
        finally:
            os.close(fd)


def peak_mb(sandbox: Sandbox) -> int:
    """The highest memory any slot's cgroup held since the last look (reset here)."""
    zygote = sandbox._zygote
    assert zygote is not None and zygote.cgroups is not None
    peak = 0
    for base in zygote.cgroups.dirs:
        for slot in Path(base).glob("slot-*"):
            for name in ("memory.max_usage_in_bytes", "memory.peak"):  # v1, v2
                if (slot / name).exists():
                    peak = max(peak, int((slot / name).read_text().split()[0]))
                    (slot / name).write_text("0")
    return peak >> 20


@pytest.mark.parametrize("isolation", [pytest.param("bwrap", marks=NEEDS_BWRAP), "builtin"])
async def test_a_first_java_execution_holds_no_more_than_later_ones(isolation: str) -> None:
    if os.geteuid() != 0 or cgroup_version() is None:
        pytest.skip("no memory cgroup tracegen may write (root, cgroup v1 or v2)")
    async with Sandbox(isolation) as sandbox:
        built = await Programs(sandbox).build(JAVA["accepted"], "java")
    assert built.binary is not None, (built.failure, built.error)
    files = jdk_files()
    cache(files, os.POSIX_FADV_DONTNEED)  # as on a host where no JVM has run for a while
    async with Sandbox(isolation, concurrency=1) as sandbox:
        programs = Programs(sandbox)
        first = await programs.run(built, stdin=b"2 3\n", limits=LIMITS)  # a slot made anew
        assert first.stdout == b"5\n", first
        try:
            firsts = peak_mb(sandbox)
        except OSError:
            pytest.skip("this kernel's memory.peak cannot be reset (before Linux 6.12)")
        cache(files, os.POSIX_FADV_WILLNEED)  # cached by this process: charged to none
        laters = []
        for _ in range(2):
            run = await programs.run(built, stdin=b"2 3\n", limits=LIMITS)
            assert run.stdout == b"5\n", run
            laters.append(peak_mb(sandbox))
    assert firsts <= max(laters) + SLACK_MB, (firsts, laters)
