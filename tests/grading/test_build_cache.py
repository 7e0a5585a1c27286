"""Built programs on disk: another process reuses them, and no program judged in the sandbox
can plant a binary there for another sample (as root under every isolation, as ``nobody``
under tracegen's own and bubblewrap)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.contest_rows import SUM_ROWS
from tests.support.programs import CPP, SUM
from tests.support.runs import child_env, tracegen
from tests.support.sandboxes import ISOLATIONS
from tests.support.system_tools import NEEDS_BWRAP, NEEDS_GPP
from tests.support.unprivileged import NEEDS_ROOT, nobody_dir, run_script_as_nobody
from tracegen.grading.programs import ProgramJudge
from tracegen.sandbox import Sandbox
from tracegen.sandbox.build_cache import BuildCache
from tracegen.sandbox.programs import Limits, Programs


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every uid can reach (so that only the cache's own guard stops a write)."""
    with nobody_dir("tracegen-builds-", mode=0o755) as path:
        yield path


@pytest.mark.asyncio
@NEEDS_GPP
async def test_a_second_process_reuses_the_binary(open_dir: Path) -> None:
    """Two `Programs` (two processes' worth of memory caches) on one directory."""
    code = CPP["accepted"] + f"// {open_dir.name}\n"
    async with Sandbox("builtin") as sandbox:
        first = Programs(sandbox, BuildCache(open_dir / "builds"))
        assert first.disk is not None and first.disk._usable()
        assert (await ProgramJudge(first).judge(SUM, code, "cpp")).outcome == "accepted"
        second = Programs(sandbox, BuildCache(open_dir / "builds"))
        assert (await ProgramJudge(second).judge(SUM, code, "cpp")).outcome == "accepted"
    assert (first.compilations, second.compilations) == (1, 0)
    assert second.disk is not None and second.disk.hits == 1


@pytest.mark.asyncio
async def test_a_damaged_or_foreign_entry_is_ignored(open_dir: Path) -> None:
    cache = BuildCache(open_dir / "builds")
    assert cache._usable()
    cache.put("k", b"\x7fELF binary", None)
    assert cache.get("k") == (b"\x7fELF binary", None)
    entry = open_dir / "builds" / "k"
    entry.write_bytes(entry.read_bytes()[:-1] + b"X")  # not the binary its digest names
    assert cache.get("k") is None
    os.link(entry, open_dir / "builds" / "other")  # another key's name
    assert cache.get("other") is None
    entry.unlink()
    os.symlink("/bin/true", entry)
    assert cache.get("k") is None
    (open_dir / "builds").chmod(0o777)  # others may write there: not used
    assert BuildCache.for_isolation("builtin", open_dir / "builds") is None


def test_rlimit_only_without_root_gets_no_disk_cache(open_dir: Path) -> None:
    """Its executions run under tracegen's own uid, with the filesystem open to them (as
    root, under uids of their own)."""
    cache = BuildCache.for_isolation("rlimit", open_dir / "builds")
    assert (cache is not None) == (os.geteuid() == 0)


PLANT = """
import hashlib, json, os
root, key = {root!r}, {key!r}
binary = b"#!/bin/sh\\necho 5\\n"
header = {{"key": key, "main": None, "sha256": hashlib.sha256(binary).hexdigest()}}
tried = []
for name in (key, ".incoming-x"):
    try:
        with open(os.path.join(root, name), "wb") as f:
            f.write(json.dumps(header).encode() + b"\\n" + binary)
        tried.append(name + ": written")
    except OSError as e:
        tried.append(f"{{name}}: {{e.strerror}}")
print(tried)
"""
"""A program that writes a forged entry for another program's key: a script printing the
public test's answer in place of that program's binary."""


async def _plant_and_judge(isolation: str, root: Path) -> tuple[str, str, list[str]]:
    victim = CPP["hard-coded"] + f"// victim {root.name}\n"  # prints 5: wrong on the private test
    async with Sandbox(isolation) as sandbox:
        programs = Programs(sandbox, BuildCache(root))
        judge = ProgramJudge(programs)
        key = programs.key(victim, "cpp")
        planted = await programs.run(
            await programs.build(PLANT.format(root=str(root), key=key), "python"),
            stdin=b"",
            limits=_LIMITS,
        )
        entries = sorted(os.listdir(root))
        verdict = await judge.judge(SUM, victim, "cpp")
    return planted.stdout.decode(), verdict.outcome or "", entries


_LIMITS = Limits(cpu_s=2, wall_s=10, memory_mb=256, output_bytes=1 << 16)


@pytest.mark.slow
@NEEDS_GPP
@NEEDS_ROOT
@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.asyncio
async def test_no_program_can_plant_a_binary_for_another(isolation: str, open_dir: Path) -> None:
    root = open_dir / "builds"
    assert BuildCache.for_isolation(isolation, root) is not None
    said, outcome, entries = await _plant_and_judge(isolation, root)
    assert "written" not in said, said
    assert entries == []  # nothing planted
    assert outcome == "wrong"  # its own binary ran: 5 on the private test is wrong


NOBODY_IMPORTS = """
import asyncio, concurrent.futures.thread, json, os
from pathlib import Path
from tracegen.grading.programs import ProgramJudge
from tracegen.sandbox import Sandbox
from tracegen.sandbox.build_cache import BuildCache
import tests.grading.test_build_cache as case
"""
NOBODY_SCRIPT = """
root = Path({root!r})
if BuildCache.for_isolation({isolation!r}, root) is None:
    print(json.dumps({{"usable": False}}))
else:
    said, outcome, entries = asyncio.run(case._plant_and_judge({isolation!r}, root))
    print(json.dumps({{"usable": True, "said": said, "outcome": outcome, "entries": entries}}))
"""


@pytest.mark.slow
@NEEDS_GPP
@NEEDS_ROOT
@pytest.mark.parametrize("isolation", ["builtin", pytest.param("bwrap", marks=NEEDS_BWRAP)])
def test_as_nobody_no_program_can_plant_a_binary(isolation: str) -> None:
    with nobody_dir() as work:
        script = NOBODY_SCRIPT.format(root=str(work / "builds"), isolation=isolation)
        got = run_script_as_nobody(NOBODY_IMPORTS, script, cwd=work, home=str(work))
    assert got["usable"], got
    assert "written" not in got["said"], got
    assert got["entries"] == [] and got["outcome"] == "wrong", got


@pytest.mark.slow
@NEEDS_GPP
def test_a_second_verify_process_compiles_nothing(tmp_path: Path) -> None:
    """The entry the first ``tracegen verify`` wrote is the one the second reads (the same
    file, not rewritten: a compilation would replace it)."""
    row, problem_id = SUM_ROWS["code_contests"]
    problems = tmp_path / "problems.jsonl"
    problems.write_bytes(orjson.dumps(row) + b"\n")
    code = CPP["accepted"] + f"// {tmp_path.name}\n"
    answers = tmp_path / "solutions.jsonl"
    answers.write_bytes(orjson.dumps({"problem_id": problem_id, "code": code}) + b"\n")
    env = child_env(XDG_CACHE_HOME=str(tmp_path / "cache"))
    args = ["verify", str(answers), "--problems", str(problems), "--json"]
    first = tracegen(args, env=env)
    assert first.returncode == 0, first.stderr
    builds = tmp_path / "cache" / "tracegen" / "builds"
    (entry,) = builds.iterdir()
    before = entry.stat()
    second = tracegen(args, env=env)
    assert second.returncode == 0, second.stderr
    assert [json.loads(x)["outcome"] for x in second.stdout.splitlines()] == ["accepted"]
    assert list(builds.iterdir()) == [entry]
    assert (entry.stat().st_ino, entry.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
