"""The init of a program's execution. Standard library only (sent to ``python -I -S``).

A program's run (`tracegen.sandbox.programs`) is driven by the execution's own process, which
stays its init: the subreaper of every process the program starts, so that each one that
ends is reaped here and its CPU counts in what the forker sees of this process when it ends;
what is left when the program ends is killed and reaped too. Imported by the zygote, so an
execution runs these functions already compiled: for a binary, the driver is one call, and
nothing between the fork and the binary's start but system calls (each page of the warm
interpreter an execution touches is copied, about 5 us each).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Mapping
from typing import NoReturn

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_prctl = ctypes.CDLL(None).prctl
_KILL_ROUNDS = 10_000
"""A process with ``SIGKILL`` pending forks no more: the rounds of killing what is left end."""


def limit(which: int, value: int, grace: int = 0) -> None:
    """Set rlimit ``which`` to ``value`` (hard: ``grace`` more), never above its hard limit."""
    hard = resource.getrlimit(which)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard - grace)
    resource.setrlimit(which, (value, value + grace))


def become_init() -> None:
    """Make this process the subreaper of every process started after this, and not dumpable:
    the program can neither read nor trace it."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def dumpable() -> None:
    """Make this process (a forked child that runs the program) dumpable again: its own
    ``/proc/self`` is its to read."""
    _prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def run_binary(
    argv: list[str],
    *,
    stdin: str,
    output: str | None,
    cpu_s: int,
    stack: int,
    env: Mapping[str, str] | None = None,
) -> NoReturn:
    """Start ``argv`` (a binary in the working directory, or a JVM) with ``stdin`` on standard
    input, ``cpu_s`` of CPU and ``stack`` bytes of stack (0: the execution's), this process
    its init (`end_with`). With ``output`` (the file the program writes its answer to), its
    standard output goes to ``/dev/null`` and that file is this execution's output."""
    try:  # noqa: SIM105 (no context manager: fewer pages written in a forked child)
        os.close(3)  # the report pipe: the verdict is the exit and the output
    except OSError:
        pass
    fd = os.open(stdin, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    limit(resource.RLIMIT_CPU, cpu_s)  # SIGKILL at the limit: no handler answers late
    if stack:
        limit(resource.RLIMIT_STACK, stack)
    become_init()
    actions: list[tuple[int, int, int]] = []
    if output is not None:
        actions.append((os.POSIX_SPAWN_DUP2, os.open("/dev/null", os.O_WRONLY), 1))
    pid = os.posix_spawn(argv[0], argv, os.environ if env is None else env, file_actions=actions)
    end_with(pid, output)


def end_with(pid: int, output: str | None) -> NoReturn:
    """Reap every process until ``pid`` (the program) ends, kill and reap what is left, write
    ``output``'s content on standard output if given, and end as the program did."""
    while True:
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(70)
        if got == pid:
            break
    try:
        children = f"/proc/self/task/{os.getpid()}/children"
        for _ in range(_KILL_ROUNDS):
            fd = os.open(children, os.O_RDONLY)
            try:
                data = b""
                while chunk := os.read(fd, 1 << 16):
                    data += chunk
            finally:
                os.close(fd)
            left = data.split()
            if not left:
                break
            for p in left:
                try:  # noqa: SIM105
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
            for p in left:  # its own children are ours once it is gone
                try:  # noqa: SIM105
                    os.waitpid(int(p), 0)
                except ChildProcessError:
                    pass
    except OSError:
        pass
    try:
        fd = os.open(output, os.O_RDONLY) if output is not None else -1
    except OSError:
        fd = -1
    while fd >= 0 and (piece := os.read(fd, 1 << 16)):
        view = memoryview(piece)
        while view:
            view = view[os.write(1, view) :]
    if os.WIFSIGNALED(status):  # ended as the program did
        try:  # noqa: SIM105
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL's cannot be set, nor need be
            pass
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
