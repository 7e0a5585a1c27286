"""The code that runs inside the sandbox. Standard library only: it is sent to ``python -I -S``.

Run as a script, this module is the *zygote*: a warm interpreter that never runs untrusted
code itself. For each request from tracegen it forks a child that starts a new session,
takes its stdin/stdout/stderr and result pipe, applies the rlimits, moves into a fresh
working directory, drops to the slot's unprivileged uid and only then reads the payload
and runs the code and the tests. When the child is gone, every process left under that
uid is killed and the directory removed before tracegen is told the execution is over.

The results go back over the result pipe as ``HMAC-SHA256 hex + "\\n" + JSON``, keyed with
a secret that arrives on stdin and never touches a file or the environment.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import fcntl
import hmac
import importlib.machinery
import json
import linecache
import math
import os
import reprlib
import resource
import selectors
import shutil
import signal
import socket
import sys
import time
import traceback
from typing import Any

RESULT_FD = 3
REPR_LIMIT = 500
PRELOAD = [
    "bisect",
    "collections",
    "dataclasses",
    "decimal",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "typing",
]
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_HARNESS_FILE = "<string>"


# ------------------------------------------------------------------ comparing values


def to_plain(value: Any, depth: int = 0) -> tuple[bool, Any]:
    """``(True, json_value)`` for plain data (tuples become lists); ``(False, None)`` otherwise.

    Exact types only, so an object that overrides ``__eq__`` never passes as an expected value.
    """
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return True, value
    if depth > 100:
        return False, None
    if kind in (list, tuple):
        out = []
        for item in value:
            ok, plain = to_plain(item, depth + 1)
            if not ok:
                return False, None
            out.append(plain)
        return True, out
    if kind is dict:
        result = {}
        for key, item in value.items():
            ok, plain = to_plain(item, depth + 1)
            if type(key) is not str or not ok:
                return False, None
            result[key] = plain
        return True, result
    return False, None


def values_equal(actual: Any, expected: Any) -> bool:
    """Equality of JSON values: floats within a small tolerance, bools only equal bools."""
    if type(actual) is bool or type(expected) is bool:
        return type(actual) is type(expected) and actual == expected
    numbers = (int, float)
    if type(actual) in numbers and type(expected) in numbers:
        if type(actual) is int and type(expected) is int:
            return actual == expected
        return math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9)
    if type(actual) is list and type(expected) is list:
        return len(actual) == len(expected) and all(map(values_equal, actual, expected))
    if type(actual) is dict and type(expected) is dict:
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k]) for k in actual
        )
    return type(actual) is type(expected) and actual == expected


# ------------------------------------------------------------------ the harness


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = REPR_LIMIT
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 40
_repr.maxlevel = 6


def short_repr(value: Any) -> str:
    try:
        text = _repr.repr(value)
    except BaseException as e:  # a user __repr__ may raise anything
        text = f"<unrepresentable {type(value).__name__}: {type(e).__name__}>"
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 1] + "…"


def _last_line(exc: BaseException, filename: str | None = None) -> str:
    """The traceback's last line; a bare ``assert`` gets the failing statement instead."""
    line = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    if isinstance(exc, AssertionError) and not exc.args and filename:
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename == filename and frame.line:
                return f"AssertionError: {frame.line.strip()}"
    return line[:REPR_LIMIT]


def _compile(source: str, filename: str) -> Any:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def _exec(source: str, filename: str, namespace: dict[str, Any]) -> BaseException | None:
    try:
        exec(_compile(source, filename), namespace)
    except BaseException as e:
        return e
    return None


def _run_test(test: dict[str, Any], namespace: dict[str, Any], entry: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"name": test["name"], "passed": False}
    filename = f"<test {test['name']}>"
    try:
        if test["kind"] == "io":
            result["expected"] = short_repr(test["expected"])
            actual = entry(*test["args"], **test["kwargs"])
            result["actual"] = short_repr(actual)
            plain, value = to_plain(actual)
            result["plain"] = plain
            if plain:
                result["value"] = value
            result["passed"] = plain and values_equal(value, test["expected"])
            return result
        scope = dict(namespace)
        exec(_compile(test["code"], filename), scope)
        if test["kind"] == "check":
            check = scope.get("check")
            if not callable(check):
                result["error"] = "NameError: the test code defines no check(candidate)"
                return result
            check(entry)
        result["passed"] = True
    except BaseException as e:
        result["error"] = _last_line(e, filename)
    return result


def run_tests(payload: dict[str, Any]) -> dict[str, Any]:
    """Setup, solution, then each test separately; stops at the first phase that fails."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for phase, source in (("setup", payload["setup"]), ("code", payload["code"])):
        err = _exec(source, f"<{phase}>", namespace)
        if err is not None:
            return {"phase": phase, "error": _last_line(err), "tests": []}
    entry_name = payload["entry_point"]
    entry = namespace.get(entry_name) if entry_name else None
    if entry_name and not callable(entry):
        error = f"NameError: the entry point {entry_name!r} is not defined"
        return {"phase": "entry", "error": error, "tests": []}
    if not entry_name and any(t["kind"] != "assert" for t in payload["tests"]):
        return {"phase": "entry", "error": "the problem names no entry point", "tests": []}
    return {"phase": "done", "tests": [_run_test(t, namespace, entry) for t in payload["tests"]]}


def _print_user_traceback(exc: BaseException) -> None:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _HARNESS_FILE:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def run_script(payload: dict[str, Any]) -> dict[str, Any]:
    """Run code as ``__main__`` like ``python script.py`` would, exit status included."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(_compile(payload["code"], "<code>"), namespace)
    except SystemExit as e:
        if e.code is None or type(e.code) is int:
            return {"phase": "done", "exit": e.code or 0, "tests": []}
        print(e.code, file=sys.stderr)
        return {
            "phase": "done",
            "exit": 1,
            "error": f"SystemExit: {short_repr(e.code)}",
            "tests": [],
        }
    except BaseException as e:
        _print_user_traceback(e)
        return {"phase": "done", "exit": 1, "error": _last_line(e), "tests": []}
    return {"phase": "done", "exit": 0, "tests": []}


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def harness() -> int:
    """Read the payload from stdin, run it, write the authenticated report. The exit status."""
    payload = json.loads(_read_all(0))
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    signer = hmac.new(bytes.fromhex(payload.pop("key")), digestmod="sha256")
    report = run_tests(payload) if payload["mode"] == "tests" else run_script(payload)
    _flush_std()
    body = json.dumps(report).encode()
    signer.update(body)
    message = signer.hexdigest().encode() + b"\n" + body
    del signer
    try:
        while message:
            message = message[os.write(RESULT_FD, message) :]
        os.close(RESULT_FD)
    except OSError:
        return 70
    return report.get("exit", 0) & 0xFF


# ------------------------------------------------------------------ the zygote


PROBER_TIMEOUT_S = 2.0
"""A prober that has not answered for this long is killed and replaced (it may be stopped)."""
_PROBER_PRIVILEGED = 72
_NOBODY = 65534


def _only_process_of_uid() -> bool:
    """Kill every other process of the uid, then ask the kernel whether any is left.

    Under ``RLIMIT_NPROC`` 2 a clone succeeds only while the caller is its real uid's only
    process (zombies count until reaped). The clone is ``posix_spawn``'s vfork-like one,
    and exec of ``""`` fails at once, so a success costs microseconds.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    try:
        pid = os.posix_spawn("", ["probe"], {})
    except FileNotFoundError:
        return True
    except BlockingIOError:
        return False
    os.waitpid(pid, 0)
    return False


def _prober(sock: socket.socket) -> None:
    """Serve requests ``uid`` -> the same ``uid`` once that uid has no process left.

    It takes the uid as its real and effective uid only, keeping root as saved uid to come
    back: processes of the uid can signal it (the zygote replaces it if they kill or stop
    it) but cannot ptrace or otherwise change it, and its ``kill(-1)`` reaches only them.
    """
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    os.closerange(3, sock.fileno())
    os.closerange(sock.fileno() + 1, 1 << 20)
    resource.setrlimit(resource.RLIMIT_NPROC, (2, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
    os.setresuid(_NOBODY, _NOBODY, 0)
    with contextlib.suppress(PermissionError):
        os.kill(os.getppid(), 0)
        os._exit(_PROBER_PRIVILEGED)  # its kill(-1) under a uid would hit the zygote
    os.setresuid(0, 0, 0)
    while data := sock.recv(64):
        uid = int(data)
        os.setresuid(uid, uid, 0)
        while not _only_process_of_uid():
            time.sleep(0.0005)
        os.setresuid(0, 0, 0)
        sock.send(data)


def _reroot(path: Any, old: str, new: str) -> Any:
    if type(path) is str and (path == old or path.startswith(old + "/")):
        return new + path[len(old) :]
    return path


def reroot_imports(old: str, new: str) -> list[str]:
    """Point every path the import system holds under ``old`` under ``new``; the package dirs.

    Besides ``sys.path`` and the prefixes, the modules already loaded keep their package
    directories and loader paths: submodules imported later (``encodings.idna`` for a codec
    lookup) and package resources must be found through ``new`` too, and tracebacks read
    the source lines of these modules through their loaders.
    """
    sys.path[:] = [_reroot(p, old, new) for p in sys.path]
    for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix", "_stdlib_dir"):
        setattr(sys, name, _reroot(getattr(sys, name), old, new))
    sys.path_importer_cache.clear()
    packages: dict[str, None] = {}
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        loader = getattr(module, "__loader__", None)
        for owner, attr in (
            (module, "__file__"),
            (module, "__cached__"),
            (spec, "origin"),
            (spec, "cached"),
            (loader, "path"),
        ):
            value = getattr(owner, attr, None)
            if (moved := _reroot(value, old, new)) is not value:
                setattr(owner, attr, moved)
        for locations in (
            module.__dict__.get("__path__"),
            getattr(spec, "submodule_search_locations", None),
        ):
            if type(locations) is list:
                locations[:] = [_reroot(p, old, new) for p in locations]
                packages.update(dict.fromkeys(locations))
    return list(packages)


class Zygote:
    """Forks one child per request and reports each once nothing of it is left."""

    def __init__(self, sock: socket.socket, config: dict[str, Any]) -> None:
        self.sock = sock
        self.drop = bool(config["drop"])
        self.workbase = config["workbase"]
        self.env = dict(config["env"])
        self.prefix_fd = -1
        if config["remap_prefix"]:
            # The children's uid cannot traverse to the interpreter (a pyenv under /root):
            # they import through this directory fd instead, with the finders warmed here.
            low = os.open(sys.base_prefix, os.O_RDONLY | os.O_DIRECTORY)
            self.prefix_fd = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 100)  # clear of 0-3
            os.close(low)
            packages = reroot_imports(sys.base_prefix, f"/proc/self/fd/{self.prefix_fd}")
            importlib.machinery.PathFinder.find_spec("_tracegen_warm_finders", sys.path + packages)
        self.libc = ctypes.CDLL(None, use_errno=True)
        # Orphans of an execution become our children, so they are reaped, not left as zombies
        # that keep counting against the slot's process limit.
        self.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, None)
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        self.runs: dict[int, dict[str, Any]] = {}
        self.by_pid: dict[int, int] = {}
        self.closing = False
        self.prober: dict[str, Any] | None = None
        self.emptying: dict[int, int] = {}
        self.deadline: float | None = None

    def serve(self) -> None:
        """Until tracegen hangs up and every execution is over and cleaned up."""
        self.sock.send(b'{"ready": true}')
        while self.runs or not self.closing:
            timeout = None if self.deadline is None else self.deadline - time.monotonic()
            for key, _ in self.sel.select(None if timeout is None else max(timeout, 0)):
                if key.data is None:
                    if not self._on_request():
                        self._close()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        os.read(key.fd, 4096)
                elif key.data in self.by_pid:
                    self._on_exit(self.by_pid[key.data])
                elif self.prober is not None and key.data == (self.prober["pid"], "answer"):
                    self._on_prober_answer()
                elif self.prober is not None and key.data == (self.prober["pid"], "exit"):
                    self._on_prober_exit()
            self._reap_orphans()
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.deadline = None
                if self.prober is not None:
                    os.kill(self.prober["pid"], signal.SIGKILL)

    def _reap_orphans(self) -> None:
        if self.prober is not None:
            # Stopped by a process of the uid it was emptying: replace it now.
            with contextlib.suppress(ChildProcessError):
                if os.waitid(os.P_PID, self.prober["pid"], os.WSTOPPED | os.WNOHANG):
                    os.kill(self.prober["pid"], signal.SIGKILL)
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            if info.si_pid in self.by_pid:
                self._on_exit(self.by_pid[info.si_pid])
            elif self.prober is not None and info.si_pid == self.prober["pid"]:
                self._on_prober_exit()
            else:
                os.waitpid(info.si_pid, 0)

    def _on_request(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 8)
        except OSError:
            return False
        if not data:
            return False
        msg = json.loads(data)
        if msg["op"] == "kill":
            run = self.runs.get(msg["id"])
            if run is not None and "status" not in run:
                self._kill_group(run["pid"])
            return True
        self._start(msg, fds)
        return True

    def _close(self) -> None:
        self.closing = True
        self.sel.unregister(self.sock)
        for run in self.runs.values():
            if "status" not in run:
                self._kill_group(run["pid"])

    def _start(self, msg: dict[str, Any], fds: list[int]) -> None:
        run_id, uid = msg["id"], msg["uid"]
        workdir = os.path.join(self.workbase, f"run-{run_id}")
        os.mkdir(workdir, 0o700)
        if self.drop:
            os.chown(workdir, uid, uid)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                self._child(fds, uid, workdir, msg["limits"])
                code = harness()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.runs[run_id] = {"uid": uid, "workdir": workdir, "pid": pid, "pidfd": pidfd}
        self.by_pid[pid] = run_id
        self.sel.register(pidfd, selectors.EVENT_READ, pid)

    def _child(self, fds: list[int], uid: int, workdir: str, limits: dict[str, int]) -> None:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        keep = sorted({0, 1, 2, RESULT_FD, self.prefix_fd} - {-1})
        for low, high in zip(keep, [*keep[1:], 1 << 20], strict=True):
            os.closerange(low + 1, high)
        mb = 1024 * 1024
        for name, soft, hard in (
            (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
            (resource.RLIMIT_AS, limits["memory_mb"] * mb, limits["memory_mb"] * mb),
            (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb, limits["file_size_mb"] * mb),
            (resource.RLIMIT_NPROC, limits["processes"], limits["processes"]),
            (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
            (resource.RLIMIT_CORE, 0, 0),
        ):
            resource.setrlimit(name, (soft, hard))
        os.chdir(workdir)
        if self.drop:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:
            os._exit(70)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(self.env, HOME=workdir, TMPDIR=workdir, PWD=workdir)

    def _kill_group(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)

    def _on_exit(self, run_id: int) -> None:
        run = self.runs[run_id]
        pid = run["pid"]
        _, status, usage = os.wait4(pid, 0)
        del self.by_pid[pid]
        self.sel.unregister(run["pidfd"])
        os.close(run["pidfd"])
        run["status"] = status
        run["cpu_s"] = usage.ru_utime + usage.ru_stime
        self._kill_group(pid)
        if self.drop:
            self.emptying[run["uid"]] = run_id
            self._ask_prober(run["uid"])
        else:
            self._finish(run_id)

    def _ask_prober(self, uid: int) -> None:
        if self.prober is None:
            self._spawn_prober()
        assert self.prober is not None
        with contextlib.suppress(OSError):  # a dying prober: its replacement is asked again
            self.prober["sock"].send(str(uid).encode())
        if self.deadline is None:
            self.deadline = time.monotonic() + PROBER_TIMEOUT_S

    def _spawn_prober(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                _prober(theirs)
            finally:
                os._exit(0)
        theirs.close()
        ours.setblocking(False)
        pidfd = os.pidfd_open(pid)
        self.prober = {"pid": pid, "sock": ours, "pidfd": pidfd}
        self.sel.register(ours, selectors.EVENT_READ, (pid, "answer"))
        self.sel.register(pidfd, selectors.EVENT_READ, (pid, "exit"))

    def _on_prober_answer(self) -> None:
        assert self.prober is not None
        try:
            data = self.prober["sock"].recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_prober_exit()
            return
        run_id = self.emptying.pop(int(data), None)
        self.deadline = time.monotonic() + PROBER_TIMEOUT_S if self.emptying else None
        if run_id is not None:
            self._finish(run_id)

    def _on_prober_exit(self) -> None:
        """The prober died (killed by a process it was emptying, or stalled): replace it."""
        prober, self.prober = self.prober, None
        assert prober is not None
        os.kill(prober["pid"], signal.SIGKILL)
        _, status = os.waitpid(prober["pid"], 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _PROBER_PRIVILEGED:
            raise SystemExit("the prober keeps its capabilities under an unprivileged uid")
        for key in ("sock", "pidfd"):
            self.sel.unregister(prober[key])
        prober["sock"].close()
        os.close(prober["pidfd"])
        self.deadline = None
        for uid in self.emptying:
            self._ask_prober(uid)

    def _finish(self, run_id: int) -> None:
        run = self.runs.pop(run_id)
        shutil.rmtree(run["workdir"], ignore_errors=True)
        status = run["status"]
        done = {
            "id": run_id,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "cpu_s": run["cpu_s"],
        }
        with contextlib.suppress(OSError):
            self.sock.send(json.dumps(done).encode())


def main() -> None:
    config = json.loads(sys.argv[1])
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for name in PRELOAD:
        __import__(name)
    if config["drop"]:
        os.chmod(config["workbase"], 0o711)
    sock = socket.socket(fileno=config["fd"])
    Zygote(sock, config).serve()


if __name__ == "__main__":
    main()
