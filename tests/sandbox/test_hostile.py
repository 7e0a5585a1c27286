"""Hostile code: after each, tracegen is alive, nothing is left running, the status says why."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from tests.support.forgeries import FORGED_REPORT
from tests.support.sandboxes import ISOLATIONS, LIMITS, sandbox_processes
from tests.support.system_tools import NEEDS_BWRAP
from tests.support.unprivileged import nobody_dir
from tracegen.sandbox import Sandbox
from tracegen.schema import Problem, TestCase

SQUARE = Problem(
    id="square",
    prompt="",
    entry_point="square",
    tests=[TestCase(name="three", kind="io", args=[3], expected=9)],
)


async def run_and_check(sandbox: Sandbox, code: str):
    result = await sandbox.run_tests(code, SQUARE)
    assert sandbox_processes(judges=False) == []
    return result


async def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "while True:\n    pass\n")
    assert result.status == "timeout"


@pytest.mark.slow
async def test_busy_loop_in_a_thread_times_out(sandbox: Sandbox) -> None:
    code = (
        "import threading\n"
        "def spin():\n    while True:\n        pass\n"
        "t = threading.Thread(target=spin)\nt.start()\nt.join()\n"
    )
    assert (await run_and_check(sandbox, code)).status == "timeout"


@pytest.mark.slow
async def test_fork_bomb_is_contained_and_cleaned_up(sandbox: Sandbox) -> None:
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result = await run_and_check(sandbox, code)
    assert result.status == "timeout"
    assert (await sandbox.run_code("print('still fine')")).stdout == "still fine\n"


LEFT_BEHIND = {
    "a grandchild that left the session": (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(60)\n    os._exit(0)\nos.wait()\nprint('done')\n"
    ),
    # The code makes itself the subreaper of what it leaves behind, then exits: those
    # processes are then reparented past it, and must be found and killed all the same.
    "processes under a subreaper of the code": (
        "import ctypes, os, time\nctypes.CDLL(None).prctl(36, 1, 0, 0, 0)\n"
        "if os.fork() == 0:\n    if os.fork() == 0:\n        os.setsid()\n"
        "        while True:\n            time.sleep(60)\n    os._exit(0)\n"
        "os.wait()\nprint('done')\n"
    ),
    "a process fighting the cleanup": (
        "import os, signal\nmain = os.getpid()\nif os.fork() == 0:\n    os.setsid()\n"
        "    while os.getppid() == main:\n        pass\n    while True:\n"
        "        for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
        "            try:\n                os.kill(-1, sig)\n            except OSError:\n"
        "                pass\n"
        "print('done')\n"
    ),
}


@pytest.mark.parametrize("code", list(LEFT_BEHIND.values()), ids=list(LEFT_BEHIND))
async def test_processes_left_behind_are_killed(sandbox: Sandbox, code: str) -> None:
    # Many times: the cleanup racing a process that fights it once lost a fourth of the
    # races, and each loss cost it a whole new helper (the execution timed out).
    for _ in range(20):
        result = await sandbox.run_code(code)
        assert (result.status, result.stdout) == ("ok", "done\n")
        assert sandbox_processes(judges=False) == []


async def test_process_limit_really_applies(sandbox: Sandbox) -> None:
    code = (
        "import os, time\nn = 0\n"
        "try:\n    for _ in range(200):\n        if os.fork() == 0:\n            time.sleep(60)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n"
    )
    result = await sandbox.run_code(code)
    assert result.status == "ok"
    assert int(result.stdout) < LIMITS.processes
    assert sandbox_processes(judges=False) == []


async def test_allocating_10_gb_is_a_memory_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "x = bytearray(10 * 1024 ** 3)\n")
    assert result.status == "memory"


async def test_writing_a_2_gb_file_fails_at_the_size_limit(sandbox: Sandbox) -> None:
    code = (
        "with open('big', 'wb') as f:\n    for _ in range(2048):\n        f.write(b'x' * 2**20)\n"
    )
    result = await run_and_check(sandbox, code)
    assert result.status == "error"
    assert "File too large" in (result.error or "")


async def test_printing_100_mb_hits_the_output_limit(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "import sys\nsys.stdout.write('x' * 100_000_000)\n")
    assert result.status == "output-limit"
    assert result.stdout_truncated and len(result.stdout) == LIMITS.output_bytes


async def test_api_key_and_home_files_are_out_of_reach(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "sk-secret-key")
    secret = tmp_path / "credentials"
    secret.write_text("sk-secret-file")
    secret.chmod(0o600)
    code = (
        "import os\nprint(os.environ.get('OLLAMA_API_KEY'), os.environ['HOME'] == os.getcwd())\n"
        f"for path in ({str(secret)!r}, {str(Path.home())!r}):\n"
        "    try:\n        print(open(path).read() if os.path.isfile(path) else os.listdir(path))\n"
        "    except OSError as e:\n        print(type(e).__name__)\n"
    )
    result = await sandbox.run_code(code)
    assert result.status == "ok"
    assert "sk-secret" not in result.stdout
    assert result.stdout.splitlines()[0] == "None True"


NOT_STOPPED_BY_RLIMIT = pytest.mark.xfail(
    strict=True, reason="rlimit isolates neither network nor files: docs/sandbox.md"
)
ISOLATION_PROMISES = [
    pytest.param("bwrap", marks=[NEEDS_BWRAP, pytest.mark.slow]),
    pytest.param("builtin"),
    pytest.param("rlimit", marks=[NOT_STOPPED_BY_RLIMIT, pytest.mark.slow]),
]
"""Attacks only bwrap and builtin stop: under ``rlimit`` they succeed (a strict xfail)."""


@pytest.mark.parametrize("flavour", ISOLATION_PROMISES)
async def test_network_is_unreachable_loopback_included(flavour: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        async with Sandbox(flavour, limits=LIMITS) as sandbox:
            result = await sandbox.run_code(code)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.status == "error"
    assert "Error" in (result.error or "")


@pytest.mark.parametrize("flavour", ISOLATION_PROMISES)
async def test_the_hosts_tmp_is_out_of_reach(flavour: str) -> None:
    target = Path("/tmp") / f"escape-{uuid.uuid4().hex}"
    code = f"open({str(target)!r}, 'w').write('x')\n"
    async with Sandbox(flavour, limits=LIMITS) as sandbox:
        result = await sandbox.run_code(code)
    written = target.exists()
    target.unlink(missing_ok=True)
    assert not written
    # Under bubblewrap /tmp is the execution's own tmpfs: the write lands there, unseen.
    assert result.status == ("ok" if flavour == "bwrap" else "error")


@pytest.mark.parametrize("flavour", ISOLATION_PROMISES)
async def test_files_every_user_may_read_are_out_of_reach(flavour: str) -> None:
    with nobody_dir("tracegen-readable-", mode=0o755) as folder:
        (folder / "problems.jsonl").write_text('{"expected": 42}\n')
        (folder / "problems.jsonl").chmod(0o644)
        code = f"print(open({str(folder / 'problems.jsonl')!r}).read())\n"
        async with Sandbox(flavour, limits=LIMITS) as sandbox:
            result = await sandbox.run_code(code)
    assert "42" not in result.stdout
    assert result.status == "error"


@pytest.mark.parametrize("flavour", ISOLATION_PROMISES)
async def test_unix_sockets_of_the_host_are_out_of_reach(flavour: str) -> None:
    with nobody_dir("tracegen-socket-", mode=0o755) as folder:
        path = folder / "service.sock"
        with socket.socket(socket.AF_UNIX) as service:
            service.bind(str(path))
            service.listen()
            service.setblocking(False)
            path.chmod(0o777)
            code = f"import socket\nsocket.socket(socket.AF_UNIX).connect({str(path)!r})\n"
            async with Sandbox(flavour, limits=LIMITS) as sandbox:
                result = await sandbox.run_code(code)
            with pytest.raises(BlockingIOError):
                service.accept()
    assert result.status == "error"


async def test_writing_outside_the_working_directory_leaves_no_file(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    name = f"escape-{uuid.uuid4().hex}"
    targets = [tmp_path / name, Path.cwd() / name]
    code = (
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n        open(path, 'w').write('x')\n    except OSError:\n        pass\n"
    )
    await sandbox.run_code(code)
    assert [t for t in targets if t.exists()] == []


async def test_killing_the_parent_is_refused(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "import os\nos.kill(os.getppid(), 9)\n")
    assert result.status == "error"
    assert (await sandbox.run_code("print(1)")).status == "ok"


async def test_sys_exit_before_the_tests_is_an_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "import sys\nsys.exit(0)\n")
    assert (result.status, result.error) == ("error", "SystemExit: 0")


async def test_os_exit_before_the_tests_is_an_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "import os\nos._exit(0)\n")
    assert result.status == "error"
    assert "before reporting results" in (result.error or "")


async def test_printing_a_fake_result_line_does_not_pass(sandbox: Sandbox) -> None:
    code = (
        'print(\'{"phase": "done", "tests": [{"name": "three", "passed": true}]}\')\n'
        "print('all tests passed')\ndef square(x):\n    return 0\n"
    )
    result = await run_and_check(sandbox, code)
    assert result.status == "failed"


async def test_writing_a_forged_report_to_the_channel_is_an_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, FORGED_REPORT)
    assert result.status == "error"
    assert result.error == "the program garbled its channel to the tests"


async def test_deep_recursion_is_a_test_failure(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "def square(x):\n    return square(x)\n")
    assert result.status == "failed"
    assert (result.tests[0].error or "").startswith("RecursionError")


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ISOLATIONS)
async def test_unbounded_recursion_is_memory_at_the_memory_limit(flavour: str) -> None:
    """Its frames are memory it holds: the cgroup (root) or the watch (a normal user) stops
    it at the limit (an address-space limit made it a `MemoryError`, a failed test)."""
    code = "import sys\nsys.setrecursionlimit(10**9)\ndef square(x):\n    return square(x) + 1\n"
    limits = LIMITS.model_copy(update={"memory_mb": 128, "timeout_s": 30, "cpu_s": 30})
    async with Sandbox(flavour, limits=limits) as sandbox:
        result = await run_and_check(sandbox, code)
    assert result.status == "memory", result
    assert result.error is not None


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ISOLATIONS)
async def test_cpu_limit_is_a_timeout_even_when_sigxcpu_is_ignored(flavour: str) -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n"
    limits = LIMITS.model_copy(update={"cpu_s": 1, "timeout_s": 30})
    async with Sandbox(flavour, limits=limits) as sandbox:
        result = await run_and_check(sandbox, code)
    assert (result.status, result.error) == ("timeout", "CPU time limit exceeded (SIGKILL)")


async def test_syntax_error_is_an_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "def square(x) return x\n")
    assert result.status == "error"
    assert (result.error or "").startswith("SyntaxError")


async def test_missing_entry_point_is_an_error(sandbox: Sandbox) -> None:
    result = await run_and_check(sandbox, "def cube(x):\n    return x ** 3\n")
    assert result.status == "error"
    assert "'square' is not defined" in (result.error or "")


@pytest.mark.slow
async def test_ignoring_signals_does_not_escape_the_timeout(sandbox: Sandbox) -> None:
    code = (
        "import signal\n"
        "for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n    pass\n"
    )
    result = await run_and_check(sandbox, code)
    assert result.status == "timeout"
    assert os.getpid() > 0
