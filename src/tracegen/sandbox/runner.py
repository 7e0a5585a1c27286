"""`Sandbox`: run untrusted Python in fresh, limited, isolated processes, asynchronously."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.machinery
import itertools
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal, NamedTuple, TypedDict, Unpack, cast

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from tracegen.cores import usable_cores
from tracegen.errors import SandboxError
from tracegen.sandbox import _wire
from tracegen.sandbox._confine import landlock_abi, seccomp_supported
from tracegen.sandbox.base import IsolationName, SandboxLimits
from tracegen.sandbox.isolation import (
    SAFE_ENV,
    Cgroups,
    builtin_layers,
    bwrap_prefix,
    count_own_processes,
    detect_isolation,
    give_back_uid,
    judge_uid,
    package_dirs,
    prefix_hidden_from_others,
    prober_uid,
    running_as_root,
    sandbox_command,
    take_uid,
    warm_runtime_files,
)
from tracegen.schema import ExecResult, ExecStatus, Problem, TestCase, TestResult

_REPORT_LIMIT = 64 << 20
_START_TIMEOUT_S = 30.0
_CLEANUP_TIMEOUT_S = 10.0
_FORGED = "the result channel was forged or garbled"
_GARBLED = "the program garbled its channel to the tests"
_SIGNALS = {9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 24: "SIGXCPU", 25: "SIGXFSZ", 7: "SIGBUS"}


class _TestReport(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    passed: bool | None  # None for `io` tests: tracegen compares, the judge has no `expected`
    actual: str | None = None
    error: str | None = None
    plain: bool = False
    value: Any = None


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    phase: Literal["setup", "code", "entry", "done"]
    error: str | None = None
    exit: int | None = None
    channel: Literal["ok", "gone", "garbled"] = "ok"
    tests: list[_TestReport]


class _WorkerDied(Exception):
    pass


@dataclass
class _Raw:
    """What one execution produced, before it is judged."""

    exit_code: int | None = None
    signal: int | None = None
    killed_for: Literal["timeout", "output-limit"] | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    report: bytes = b""
    report_overflow: bool = False
    duration_s: float = 0.0
    cpu_limit_hit: bool = False
    worker_died: bool = False
    killed_by_cleanup: bool = False
    judge: Literal["done", "died"] | None = None
    out_of_memory: bool = False
    key: bytes = b""
    cpu_s: float = 0.0


class ProcessOptions(TypedDict, total=False):
    """What one `Sandbox.run_process` execution may use instead of the sandbox's limits
    (each left out, or None: the sandbox's), and the files it starts with."""

    timeout_s: float | None
    """Wall clock."""
    output_bytes: int | None
    """Of stdout, and of stderr."""
    cpu_s: float | None
    """The CPU of all its processes, ended or running (at most the sandbox's)."""
    memory_mb: int | None
    """All the memory its processes hold (at most the sandbox's, but with ``toolchain``)."""
    toolchain: bool
    """A compiler's execution: ``memory_mb`` is its own declared limit, whatever the
    sandbox's (which bounds the programs it runs, not the tools that build them)."""
    files: Sequence[tuple[str, bytes, int]]
    """(name, content, mode) written in its directory before it runs: data kept out of the
    script's source, which the execution would otherwise parse. Their bytes reach it as
    they are, after the request's line of JSON."""
    launcher: bool
    """The script only starts a program (a binary, a JVM), and no Python of the program
    runs in it: it runs in a plain namespace, without the module, ``solution.py`` and
    ``sys`` entries that make a Python program its own module."""


@dataclass(frozen=True)
class ProcessRun:
    """What one `Sandbox.run_process` execution did, as its parent saw it: nothing in it
    comes from a report the process could write. ``killed_for`` says tracegen ended it
    (``error``: the sandbox failed, never the program's doing)."""

    exit_code: int | None
    signal: int | None
    cpu_s: float
    wall_s: float
    stdout: bytes
    stderr: bytes
    killed_for: Literal["timeout", "output-limit", "memory", "error"] | None
    """``memory``: what the execution held in all (every process, its shared memory and
    files in memory) went over its memory limit, and a process of it was killed for it."""


@dataclass
class _Capture:
    """Reads one pipe to EOF (see `_Outputs`), keeping at most ``limit`` bytes."""

    fd: int
    limit: int
    on_overflow: Callable[[], None] | None = None
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    eof: asyncio.Future[None] | None = None

    def read(self) -> bool:
        """Take what the pipe holds; whether it is at its end."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            return True
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            if self.on_overflow is not None:
                self.on_overflow()
        self.data += chunk[: max(room, 0)]
        return False


class _Outputs:
    """The pipes of every execution's output, behind one reader of the event loop.

    An epoll of its own: a pipe costs a system call to watch and one to forget, without
    the event loop's bookkeeping of a reader each.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.epoll = select.epoll()
        self.captures: dict[int, _Capture] = {}
        loop.add_reader(self.epoll.fileno(), self._ready)

    def watch(self, capture: _Capture) -> None:
        os.set_blocking(capture.fd, False)
        capture.eof = self.loop.create_future()
        self.epoll.register(capture.fd, select.EPOLLIN)
        self.captures[capture.fd] = capture

    def _ready(self) -> None:
        for fd, _ in self.epoll.poll(0):
            capture = self.captures.get(fd)
            if capture is not None and capture.read():
                self.close(capture)

    def close(self, capture: _Capture) -> None:
        """Stop watching ``capture`` and close its pipe (once)."""
        if self.captures.get(capture.fd) is capture:
            del self.captures[capture.fd]
            self.epoll.unregister(capture.fd)
            os.close(capture.fd)
        if capture.eof is not None and not capture.eof.done():
            capture.eof.set_result(None)

    def shut(self) -> None:
        for capture in list(self.captures.values()):
            self.close(capture)
        self.loop.remove_reader(self.epoll.fileno())
        self.epoll.close()


class _Done(NamedTuple):
    """The zygote's report that an execution is over and cleaned up."""

    exit: int | None
    signal: int | None
    cpu_s: float
    killed: bool  # its process was still running when its judge was done with it
    judge: Literal["done", "died"] | None
    out_of_memory: bool  # its cgroup's memory ran out (a process of it was killed for it)

    @classmethod
    def parse(cls, words: list[bytes]) -> _Done:
        """``done ID EXIT SIGNAL CPU KILLED JUDGE OOM``, ``-`` for none."""
        number = [None if w == b"-" else int(w) for w in words[2:4]]
        judge = None if words[6] == b"-" else cast(Literal["done", "died"], words[6].decode())
        return cls(number[0], number[1], float(words[4]), words[5] == b"1", judge, words[7] == b"1")


class _ZygoteProcess:
    """The sandbox's handle on the warm interpreter that forks every execution: it starts the
    process, sends it requests and reads its reports (the process itself runs
    `tracegen.sandbox._zygote.Zygote`)."""

    def __init__(
        self,
        isolation: IsolationName,
        root: bool,
        limits: dict[str, int],
        packages: list[str] | None = None,
    ) -> None:
        self.isolation = isolation
        self.root = root
        self.limits = limits
        self.packages = packages or []
        self.alive = False
        self.cgroups: Cgroups | None = None
        self._pending: dict[int, asyncio.Future[_Done]] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._stderr: IO[bytes] | None = None
        self._workbase: str | None = None
        self.outputs: _Outputs | None = None

    async def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        warming: threading.Thread | None = None
        if self.root:
            self.cgroups = Cgroups.make(self.limits)
            if self.cgroups is not None:
                warming = warm_runtime_files()
        cgroup_dirs = self.cgroups.dirs if self.cgroups is not None else []
        if self.isolation == "bwrap":
            prefix = bwrap_prefix(self.root, binds=cgroup_dirs, read_only=self.packages)
            workbase = "/tmp"
        else:
            self._workbase = workbase = tempfile.mkdtemp(prefix="tracegen-sandbox-")
            prefix = []
        config = {
            "isolation": self.isolation,
            "cgroups": cgroup_dirs,
            "cgroup_files": self.cgroups.files if self.cgroups is not None else {},
            "fd": theirs.fileno(),
            "drop": self.root,
            "judge_uid": judge_uid(),
            "prober_uid": prober_uid(),
            "limits": self.limits,
            "workbase": workbase,
            "env": SAFE_ENV,
            "remap_prefix": self.isolation != "bwrap" and self.root and prefix_hidden_from_others(),
            "confine": self._confinement(),
            "packages": self.packages,
        }
        command = sandbox_command("tracegen.sandbox._zygote.main", config=config)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        try:
            self._proc = subprocess.Popen(
                [*prefix, *command.argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=[theirs.fileno()],
                # Symbols bound once in the zygote: lazy binding would redo it (and copy the
                # pages it writes) in every forked child. Children get `SAFE_ENV` alone.
                env={**SAFE_ENV, "LD_BIND_NOW": "1"},
                start_new_session=True,
            )
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        loop = asyncio.get_running_loop()
        assert self._proc.stdin is not None
        feeding = asyncio.ensure_future(asyncio.to_thread(_feed, self._proc.stdin, command.modules))
        try:
            ready = await asyncio.wait_for(loop.sock_recv(ours, 1 << 16), _START_TIMEOUT_S)
        except TimeoutError:
            ready = b""
        await feeding
        if warming is not None:  # done before any execution may be the first to read them
            await asyncio.to_thread(warming.join)
        if not ready:
            detail = self._stderr_tail()
            await self.close()
            raise SandboxError(f"the sandbox could not start: {detail}")
        self.alive = True
        loop.add_reader(ours.fileno(), self._on_message)
        self.outputs = _Outputs(loop)

    def _confinement(self) -> dict[str, Any]:
        """What the zygote's children apply: the built-in isolation's layers; under bwrap
        the seccomp filter, and dropping the capabilities bwrap's user namespace gave."""
        if self.isolation == "builtin":
            config = builtin_layers().zygote_config()
            return {**config, "read_only": [*config["read_only"], *self.packages]}
        if self.isolation == "bwrap":
            return {
                "seccomp": seccomp_supported(),
                "drop_caps": not self.root,
                "landlock": landlock_abi(),
                "scope_only": True,
            }
        return {}

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return "no output"
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def submit(
        self, run_id: int, uid: int, mode: str, fds: list[int], cpu_s: float, memory_mb: int
    ) -> asyncio.Future[_Done]:
        if not self.alive or self._sock is None:
            raise _WorkerDied
        future: asyncio.Future[_Done] = asyncio.get_running_loop().create_future()
        self._pending[run_id] = future
        message = f"run {run_id} {uid} {mode} {cpu_s:.3f} {memory_mb}".encode()
        try:
            socket.send_fds(self._sock, [message], fds)
        except OSError:
            self._pending.pop(run_id, None)
            self._died()
            raise _WorkerDied from None
        return future

    def kill(self, run_id: int) -> None:
        if self.alive and self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.send(b"kill %d" % run_id)

    def _on_message(self) -> None:
        assert self._sock is not None
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._died()
                return
            words = data.split()
            future = self._pending.pop(int(words[1]), None)
            if future is not None and not future.done():
                future.set_result(_Done.parse(words))

    def _died(self) -> None:
        if self._sock is not None and self.alive:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self.alive = False
        for future in self._pending.values():
            if not future.done():
                future.set_exception(_WorkerDied())
        self._pending.clear()

    async def close(self) -> None:
        if self.outputs is not None:
            self.outputs.shut()
            self.outputs = None
        if self._sock is not None:
            if self.alive:
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self.alive = False
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                await asyncio.to_thread(self._proc.wait, _CLEANUP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, 9)
                await asyncio.to_thread(self._proc.wait)
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._workbase is not None:
            await asyncio.to_thread(_remove_tree, self._workbase)
            self._workbase = None
        if self.cgroups is not None:
            self.cgroups.remove()
            self.cgroups = None

    def stalled(self) -> None:
        """The zygote stopped answering: kill it, so that the next execution starts another."""
        self._died()
        if self._proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(self._proc.pid, signal.SIGKILL)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """Write ``data`` to a process's standard input and close it (a thread's job: more than
    a pipe holds, read only once the interpreter has started)."""
    with contextlib.suppress(OSError), pipe:  # it died first: its stderr says why
        pipe.write(data)


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class Sandbox:
    """Runs untrusted code: a fresh process per execution, limits, isolation, typed results.

    ``isolation="auto"`` uses bubblewrap when it works here, else the built-in isolation
    (namespaces, Landlock, seccomp); where neither is possible it raises `SandboxError`
    unless ``"rlimit"`` is asked for explicitly. ``.detail`` names the layers, ``.warning``
    what is missing. At most ``concurrency`` executions (default: one per core it may use,
    `usable_cores`) run at once.
    """

    def __init__(
        self,
        isolation: str = "auto",
        limits: SandboxLimits | None = None,
        concurrency: int | None = None,
        packages: bool = False,
    ) -> None:
        info = detect_isolation(isolation)
        self.info = info
        self.isolation: IsolationName = info.name
        self.warning = info.warning
        self.detail = info.detail
        self.limits = limits or SandboxLimits()
        self.concurrency = max(1, concurrency or usable_cores())
        self.packages = packages
        self._package_dirs = package_dirs()
        self._root = running_as_root()
        self._nproc = self.limits.processes
        if not self._root:
            # Candidates and judges of this and every other sandbox of the user count too.
            self._nproc += count_own_processes() + 2 * self.concurrency
        self._limits = self.limits.model_dump(
            include={"cpu_s", "memory_mb", "file_size_mb", "open_files"}
        ) | {"processes": self._nproc, "execution_processes": self.limits.processes}
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._ids = itertools.count(1)
        self._zygote: _ZygoteProcess | None = None
        self._zygote_lock = asyncio.Lock()

    @property
    def summary(self) -> str:
        """``"builtin: user+net namespaces (no network), landlock ABI 7 (...), rlimits"``."""
        return f"{self.isolation}: {self.detail.split('; ')[0]}"

    async def __aenter__(self) -> Sandbox:
        await self._ensure_zygote()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._zygote is not None:
            await self._zygote.close()
            self._zygote = None

    async def run_tests(self, code: str, problem: Problem) -> ExecResult:
        """Run ``problem.setup`` + ``code`` in one process and each non-``answer`` test
        separately in a judge process that calls the code's functions through pipes."""
        if problem.is_program:  # never judged as functions: their judge runs whole programs
            return ExecResult(
                status="error", error="a program problem is judged by tracegen.grading.programs"
            )
        tests = [t for t in problem.tests if t.kind != "answer"]
        if not tests:
            setup = f"{problem.setup}\n" if problem.setup else ""
            return await self.run_code(setup + code)
        candidate = {"setup": problem.setup, "code": code, "entry_point": problem.entry_point}
        judged = {
            "setup": problem.setup,
            "entry_point": problem.entry_point,
            "tests": [
                t.model_dump(include={"name", "kind", "args", "kwargs", "code"}) for t in tests
            ],
        }
        raw = await self._execute("tests", orjson.dumps(candidate), judged)
        return self._named_unsupported(_exec_result(raw, tests))

    async def run_code(self, code: str) -> ExecResult:
        """Run a script and capture its output; ``tests`` stays empty."""
        raw = await self._execute("code", None, {"code": code})
        return self._named_unsupported(_exec_result(raw, None))

    def _named_unsupported(self, result: ExecResult) -> ExecResult:
        """``result``, whose error names what the sandbox did not offer the program, if that
        is why it failed: ``unsupported: ...``, status ``error``; never a wrong answer."""
        if result.status not in ("failed", "error"):
            return result
        errors = [result.error, *(t.error for t in result.tests)]
        for error in errors:
            withheld = [] if self.packages else self._package_dirs
            why = _unsupported(error or "", withheld, self.limits.processes)
            if why is not None:
                result.status, result.error = "error", why
                return result
        return result

    async def run_process(self, code: str, **options: Unpack[ProcessOptions]) -> ProcessRun:
        """Run a script whose verdict is its exit and its output alone (it may replace itself
        with another program), within ``options`` (`ProcessOptions`); it must not report
        (close fd 3). An execution over its CPU is killed (``cpu_s`` says how much it used,
        every process counted); one over its memory is ``killed_for="memory"``."""
        raw = await self._execute("code", None, {"code": code}, **options)
        killed_for: Literal["timeout", "output-limit", "memory", "error"] | None = raw.killed_for
        if raw.worker_died:
            killed_for = "error"
        elif raw.out_of_memory and killed_for is None:
            killed_for = "memory"
        return ProcessRun(
            exit_code=raw.exit_code,
            signal=raw.signal,
            cpu_s=raw.cpu_s,
            wall_s=raw.duration_s,
            stdout=raw.stdout,
            stderr=raw.stderr,
            killed_for=killed_for,
        )

    async def _ensure_zygote(self) -> _ZygoteProcess:
        async with self._zygote_lock:
            if self._zygote is None or not self._zygote.alive:
                if self._zygote is not None:
                    await self._zygote.close()
                    self._zygote = None
                offered = self._package_dirs if self.packages else []
                zygote = _ZygoteProcess(self.isolation, self._root, self._limits, offered)
                await zygote.start()
                self._zygote = zygote
            return self._zygote

    async def _execute(
        self,
        mode: Literal["tests", "code"],
        candidate: bytes | None,
        signed: dict[str, Any],
        **options: Unpack[ProcessOptions],
    ) -> _Raw:
        """Run one execution: ``candidate`` to the code's process, ``signed`` (with a fresh
        key, and ``options``' files) to the process that reports: the judge, or the script
        itself."""
        cpu_s, memory_mb = options.get("cpu_s"), options.get("memory_mb")
        cpu = self.limits.cpu_s if cpu_s is None else min(cpu_s, self.limits.cpu_s)
        memory = self.limits.memory_mb
        if memory_mb is not None:
            memory = memory_mb if options.get("toolchain") else min(memory_mb, memory)
        files = options.get("files") or ()
        if files:
            signed = {**signed, "files": [[name, len(data), mode] for name, data, mode in files]}
        if options.get("launcher"):
            signed = {**signed, "launcher": True}
        key = os.urandom(32)
        # A line of JSON, then the files' bytes as they are (`_harness._take_request`).
        reporter = b"".join(
            [orjson.dumps({**signed, "key": key.hex()}), b"\n", *(data for _, data, _ in files)]
        )
        async with self._semaphore:
            uid = take_uid()
            try:
                zygote = await self._ensure_zygote()
                try:
                    raw = await self._run(
                        zygote, uid, mode, candidate, reporter, options.get("timeout_s"),
                        options.get("output_bytes"), cpu, memory,
                    )  # fmt: skip
                except _WorkerDied:
                    raw = _Raw(worker_died=True)
            finally:
                give_back_uid(uid)
        raw.key = key
        return raw

    async def _run(
        self,
        zygote: _ZygoteProcess,
        uid: int,
        mode: Literal["tests", "code"],
        candidate: bytes | None,
        reporter: bytes,
        timeout_s: float | None = None,
        output_bytes: int | None = None,
        cpu_s: float | None = None,
        memory_mb: int | None = None,
        toolchain: bool = False,
    ) -> _Raw:
        loop = asyncio.get_running_loop()
        limits = self.limits
        timeout_s = limits.timeout_s if timeout_s is None else timeout_s
        output_limit = limits.output_bytes if output_bytes is None else output_bytes
        # code: [stdin, stdout, stderr, report]; tests: [stdin, stdout, stderr, tests, report]
        count = 5 if mode == "tests" else 4
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(count)]
        ins = [0, 3] if mode == "tests" else [0]
        child_fds = [pipes[i][0] if i in ins else pipes[i][1] for i in range(count)]
        ours = [pipes[i][1] if i in ins else pipes[i][0] for i in range(count)]
        raw = _Raw()
        finished: asyncio.Future[None] = loop.create_future()

        def finish(reason: Literal["timeout", "output-limit"] | None = None) -> None:
            if not finished.done():
                raw.killed_for = reason
                finished.set_result(None)

        captures = [
            _Capture(ours[1], output_limit, lambda: finish("output-limit")),
            _Capture(ours[2], output_limit, lambda: finish("output-limit")),
            _Capture(ours[-1], _REPORT_LIMIT),
        ]
        run_id = next(self._ids)
        started = time.perf_counter()
        try:
            done_future = zygote.submit(
                run_id,
                uid,
                mode,
                child_fds,
                limits.cpu_s if cpu_s is None else cpu_s,
                limits.memory_mb if memory_mb is None else memory_mb,
            )
        except _WorkerDied:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in child_fds:
                os.close(fd)
        outputs = zygote.outputs
        assert outputs is not None  # a zygote that started
        for capture in captures:
            outputs.watch(capture)
        inputs = [reporter] if mode == "code" else [candidate or b"", reporter]
        # Payloads that fit in the pipe are written at once; a task feeds the rest.
        writers = [
            asyncio.ensure_future(_write_all(ours[i], rest))
            for i, data in zip(ins, inputs, strict=True)
            if (rest := _write_now(ours[i], data))
        ]
        done_future.add_done_callback(lambda _: finish())
        timer = loop.call_later(timeout_s, finish, "timeout")
        try:
            await finished
            if not done_future.done():
                zygote.kill(run_id)
                await asyncio.wait_for(done_future, _CLEANUP_TIMEOUT_S)
            done = done_future.result()
            raw.duration_s = time.perf_counter() - started
            if eofs := [c.eof for c in captures if c.eof is not None and not c.eof.done()]:
                await asyncio.wait_for(asyncio.gather(*eofs), _CLEANUP_TIMEOUT_S)
        except TimeoutError:
            zygote.kill(run_id)
            if done_future.cancelled():  # the zygote itself no longer answers
                zygote.stalled()
            raise _WorkerDied from None
        finally:
            timer.cancel()
            for writer in writers:
                writer.cancel()
            for capture in captures:
                outputs.close(capture)
        raw.exit_code, raw.signal = done.exit, done.signal
        raw.cpu_s = done.cpu_s
        raw.cpu_limit_hit = done.cpu_s >= (limits.cpu_s if cpu_s is None else cpu_s)
        raw.killed_by_cleanup = done.killed and raw.killed_for is None
        raw.judge = done.judge
        raw.out_of_memory = done.out_of_memory
        out, err, report = captures
        raw.stdout, raw.stdout_truncated = bytes(out.data), out.truncated
        raw.stderr, raw.stderr_truncated = bytes(err.data), err.truncated
        raw.report, raw.report_overflow = bytes(report.data), report.truncated
        if raw.killed_for is None and (out.truncated or err.truncated):
            raw.killed_for = "output-limit"
        return raw


def _write_now(fd: int, data: bytes) -> bytes:
    """Write what the pipe takes now; close it if that was all. What is left to write."""
    os.set_blocking(fd, False)
    try:
        written = os.write(fd, data) if data else 0
    except BlockingIOError:
        written = 0
    except OSError:
        written = len(data)  # the reader is gone: nothing more to do
    if written == len(data):
        os.close(fd)
        return b""
    return data[written:]


async def _write_all(fd: int, data: bytes) -> None:
    """Feed the rest of a payload without blocking the loop, then close the pipe."""
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")


def _unsupported(error: str, withheld: list[str], processes: int) -> str | None:
    """What ``error`` says the sandbox did not offer, as ``unsupported: ...``, or None: a
    package installed in ``withheld`` (beside tracegen, not offered to programs), a thread
    beyond the process limit, or what the sandbox's own code raised
    (`tracegen.sandbox._harness.Unsupported`)."""
    said = error.find("unsupported: ")
    if said >= 0:
        return error[said:]
    if error.startswith("RuntimeError: can't start new thread"):
        return (
            "unsupported: the program started more threads and processes than an execution "
            f"may have ({processes}: the process limit)"
        )
    found = _NO_MODULE.search(error)
    if found is None or not withheld:
        return None
    top = found.group(1).split(".")[0]
    if importlib.machinery.PathFinder.find_spec(top, withheld) is None:
        return None
    return (
        f"unsupported: {top} is installed beside tracegen, but programs import only the "
        "standard library unless --sandbox-packages is given"
    )


def _parse_report(raw: _Raw) -> _Report | None:
    """The report if it is authentic and well-formed, else None."""
    if raw.report_overflow or b"\n" not in raw.report:
        return None
    mac, body = raw.report.split(b"\n", 1)
    expected = hmac.digest(raw.key, body, "sha256").hex().encode()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        return _Report.model_validate_json(body)
    except ValidationError:
        return None


def _test_results(report: _Report, tests: list[TestCase]) -> list[TestResult] | None:
    """Per-test results, ``io`` verdicts decided here; None if they do not add up."""
    if len(report.tests) != len(tests):
        return None
    results = []
    for got, test in zip(report.tests, tests, strict=True):
        if got.name != test.name or (got.passed is None) != (test.kind == "io"):
            return None
        expected = None
        if test.kind == "io":
            expected = _wire.short_repr(test.expected)
            passed = (
                got.plain and got.error is None and _wire.values_equal(got.value, test.expected)
            )
        else:
            passed = bool(got.passed)
        results.append(
            TestResult(
                name=got.name,
                passed=passed,
                expected=expected,
                actual=got.actual,
                error=got.error,
            )
        )
    return results


def _memory_error(report: _Report) -> bool:
    errors = [report.error, *(t.error for t in report.tests)]
    return any(e is not None and e.startswith("MemoryError") for e in errors)


def _exec_result(raw: _Raw, tests: list[TestCase] | None) -> ExecResult:
    ended_by_us = raw.killed_by_cleanup and raw.judge == "done"
    result = ExecResult(
        status="error",
        exit_code=0 if ended_by_us else raw.exit_code,
        stdout=raw.stdout.decode(errors="replace"),
        stderr=raw.stderr.decode(errors="replace"),
        stdout_truncated=raw.stdout_truncated,
        stderr_truncated=raw.stderr_truncated,
        duration_s=round(raw.duration_s, 6),
    )
    status, error = _verdict(raw, tests, result)
    # A process of it killed for the execution's memory: whatever the rest made of that.
    if raw.out_of_memory and status in ("ok", "failed", "error", "killed"):
        status, error = "memory", "memory limit exceeded: the kernel killed a process of it"
    result.status, result.error = status, error
    return result


def _verdict(
    raw: _Raw, tests: list[TestCase] | None, result: ExecResult
) -> tuple[ExecStatus, str | None]:
    if raw.worker_died:
        return "error", "the sandbox worker died during the execution"
    if raw.killed_for == "timeout":
        return "timeout", "wall-clock timeout: the execution was killed"
    if raw.killed_for == "output-limit":
        return "output-limit", "output limit exceeded: the execution was killed"
    cpu_limit = raw.signal == signal.SIGXCPU or (raw.signal == signal.SIGKILL and raw.cpu_limit_hit)
    # The cleanup only sends SIGKILL, to a candidate whose judge is done with it.
    if raw.signal is not None and (cpu_limit or not raw.killed_by_cleanup or raw.signal != 9):
        name = _SIGNALS.get(raw.signal, f"signal {raw.signal}")
        if cpu_limit:
            # SIGXCPU at the soft CPU limit; SIGKILL at the hard one (soft + 1 s) if ignored.
            return "timeout", f"CPU time limit exceeded ({name})"
        return "killed", f"killed by {name}"
    if raw.judge == "died":
        return "error", "the judge process died during the execution"
    report = _parse_report(raw)
    if report is None:
        if raw.report:
            return "error", _FORGED
        if tests is None:
            status: ExecStatus = "ok" if raw.exit_code == 0 else "error"
            return status, None if status == "ok" else f"exit status {raw.exit_code}"
        return "error", "the judge sent no report"
    if _memory_error(report):
        return "memory", report.error or "MemoryError"
    if tests is None:
        if report.phase != "done" or report.tests:
            return "error", _FORGED
        return ("ok", None) if raw.exit_code == 0 else ("error", report.error)
    if report.channel == "garbled":
        return "error", _GARBLED
    if report.channel == "gone":
        if raw.killed_by_cleanup and raw.signal == signal.SIGKILL:
            return "error", "the program closed its channel to the tests"
        return "error", f"the process exited (status {raw.exit_code}) before reporting results"
    if report.phase != "done":
        return "error", report.error
    results = _test_results(report, tests)
    if results is None:
        return "error", _FORGED
    result.tests = results
    return ("ok", None) if all(r.passed for r in results) else ("failed", None)
