"""Whole programs in the sandbox: compiled once per source, run once per test.

A program is prepared by `Programs.build` in an execution of its own — C++ compiled by
``g++ -std=c++17 -O2``, Java by ``javac`` into a jar, under the same isolation as everything
else, with its own wall-clock, CPU and memory limits; Python compiled to check its syntax —
and the result is kept by the hash of the source (and of the compiler's command), so the
same program is built once.
`Programs.run` then runs it for one test: the input on stdin (or in a named file), the
test's time and memory limits applied to the process, its output taken from stdout (or the
named output file). What is judged — exit status, signal, CPU time, output — is what the
execution's parent saw, never something the program could report about itself.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import math
import os
import re
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from tracegen.sandbox.build_cache import BuildCache
from tracegen.sandbox.isolation import java_home
from tracegen.sandbox.runner import ProcessRun, SandboxLimits
from tracegen.schema import Language

CPP_COMMAND: Final = ("g++", "-std=c++17", "-O2", "-pipe", "-o", "prog", "prog.cpp")
COMPILE_TIMEOUT_S: Final = 60.0
"""Wall clock a compilation may take (its CPU time is the sandbox's CPU limit)."""
COMPILE_MEMORY_MB: Final = 1024
"""Memory a compilation may use, whatever the sandbox's and the problem's memory limits (a
problem at 32 MB still compiles C++ that includes ``bits/stdc++.h``)."""
BINARY_LIMIT: Final = 64 << 20
"""The largest binary a compilation may produce."""
CACHE_SIZE: Final = 256
"""Built programs kept in memory, by hash of source and command."""


JAVA_FLAGS: Final = (
    "-XX:+UseSerialGC",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:-UsePerfData",
    "-XX:-UseContainerSupport",
    "-XX:+DisableAttachMechanism",
    "-Xss16m",
    "-Xms8m",
)
"""The JVM's options (``javac``'s too, with ``-J``): what it reserves kept small, so it starts
under an address-space limit; no files in /tmp, no attaching to it."""
JVM_OVERHEAD_MB: Final = 576
"""Address space the JVM reserves besides its heap with `JAVA_FLAGS` (measured: under 1 GB of
address space a 448 MB heap starts, 512 MB does not). A Java program's heap is the test's
memory limit, or what the sandbox's address-space limit leaves, if less."""
JAVAC_HEAP_MB: Final = 384
JAVA_ENV: Final = {"MALLOC_ARENA_MAX": "2"}
"""Two malloc arenas, not one per thread: each reserves 64 MB of address space."""

_CPP_HINT = re.compile(r"^\s*#\s*include\s*[<\"]|\bint\s+main\s*\(", re.MULTILINE)
_JAVA_HINT = re.compile(
    r"\bpublic\s+static\s+void\s+main\s*\(\s*(?:final\s+)?String|^\s*import\s+java\.", re.M
)
_JAVA_PUBLIC = re.compile(
    r"^\s*public\s+(?:(?:final|abstract|strictfp|sealed)\s+)*(?:class|interface|enum|record)"
    r"\s+([A-Za-z_$][\w$]*)",
    re.MULTILINE,
)
_JAVAC_SAID = re.compile(r"^\S+\.java:\d+: error: |^error: no class declares", re.M)
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")


def guess_language(code: str) -> Language:
    """A program's language when nothing says: Java if it declares ``public static void
    main(String`` or imports ``java.``, C++ if it includes a header or defines ``int main(``,
    else Python."""
    if _JAVA_HINT.search(code):
        return "java"
    return "cpp" if _CPP_HINT.search(code) else "python"


def java_source_name(source: str) -> str:
    """The file a Java source is compiled as: its public class's name (javac insists)."""
    found = _JAVA_PUBLIC.search(source)
    return f"{found.group(1) if found else 'Main'}.java"


def javac_command(home: str, file: str) -> list[str]:
    return [
        os.path.join(home, "bin", "javac"),
        *(f"-J{flag}" for flag in JAVA_FLAGS),
        f"-J-Xmx{JAVAC_HEAP_MB}m",
        "-J-XX:TieredStopAtLevel=1",  # javac runs once: its start-up is what costs
        "-encoding",
        "UTF-8",
        "-d",
        "classes",
        file,
    ]


class ProcessRunner(Protocol):
    """What `Programs` needs of a sandbox (`Sandbox.run_process`, its limits)."""

    @property
    def limits(self) -> SandboxLimits: ...

    async def run_process(
        self,
        code: str,
        *,
        timeout_s: float | None = None,
        output_bytes: int | None = None,
        files: Sequence[tuple[str, bytes, int]] = (),
        cpu_s: float | None = None,
        memory_mb: int | None = None,
        toolchain: bool = False,
        launcher: bool = False,
    ) -> ProcessRun: ...


def compiler_missing(language: Language) -> str | None:
    """Why programs in ``language`` cannot be built here (None: they can)."""
    if language == "cpp" and shutil.which("g++") is None:
        return "g++ is not installed"
    if language == "java" and java_home() is None:
        return "javac is not installed"
    return None


@dataclass(frozen=True, eq=False)
class Built:
    """A program ready to run: a binary (C++), a jar and its main class (Java) or checked
    source (Python); or why not."""

    language: Language
    source: str
    binary: bytes | None = None
    main: str | None = None
    """The class a Java program starts at."""
    error: str | None = None
    """The compiler's complaint: the program does not compile."""
    failure: str | None = None
    """The sandbox failed to build it (not the program's fault)."""


@dataclass(frozen=True)
class Limits:
    """One run's limits: CPU seconds (of all its processes together: one alone is stopped
    at the next whole second after it), wall-clock seconds, memory in MB (all it holds
    together) and output bytes."""

    cpu_s: float
    wall_s: float
    memory_mb: int
    output_bytes: int


def _literal(data: bytes) -> str:
    """``data`` as the literal of a hex string (``bytes.fromhex`` reads it back in the
    sandbox without importing anything: ``binascii`` would cost each execution 1 ms)."""
    return repr(data.hex())


_PRELUDE = """\
import os, sys, resource
try:
    os.close(3)
except OSError:
    pass

def _put(name, data, mode=0o600):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    view = memoryview(bytes.fromhex(data))
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)

def _limit(which, value, grace=0):
    hard = resource.getrlimit(which)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard - grace)
    resource.setrlimit(which, (value, value + grace))

def _heap(mb):  # what the address-space limit leaves a JVM's heap
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        mb = min(mb, (hard >> 20) - {overhead})
    return max(mb, 16)

def _out(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
""".replace("{overhead}", str(JVM_OVERHEAD_MB))

_COMPILE_CPP = (
    _PRELUDE
    + """
_put("prog.cpp", {source})
_limit(resource.RLIMIT_AS, {memory})
pid = os.fork()
if pid == 0:
    try:
        os.dup2(2, 1)
        os.execvp({command}[0], {command})
    finally:
        os._exit(127)
_, status = os.waitpid(pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    os._exit(1)
fd = os.open("prog", os.O_RDONLY)
while chunk := os.read(fd, 1 << 16):
    view = memoryview(chunk)
    while view:
        view = view[os.write(1, view):]
os._exit(0)
"""
)

_COMPILE_JAVA = (
    _PRELUDE
    + """
import zipfile, io
os.mkdir("classes")
_put({file}, {source})
_command = {command}
_command.insert(1, "-J-Xmx%dm" % _heap({heap}))
pid = os.fork()
if pid == 0:
    try:
        os.dup2(2, 1)
        os.execve(_command[0], _command, dict(os.environ, **{java_env}))
    finally:
        os._exit(127)
_, status = os.waitpid(pid, 0)
if os.waitstatus_to_exitcode(status) != 0:
    os._exit(1)
mains = []
jar = io.BytesIO()
with zipfile.ZipFile(jar, "w", zipfile.ZIP_STORED) as archive:
    for top, dirs, names in os.walk("classes"):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(top, name)
            member = os.path.relpath(path, "classes")
            with open(path, "rb") as f:
                data = f.read()
            archive.writestr(zipfile.ZipInfo(member, (1980, 1, 1, 0, 0, 0)), data)
            # A top-level class with a method main(String[]) in its constant pool.
            if (name.endswith(".class") and "$" not in name and b"\\x01\\x00\\x04main" in data
                    and b"([Ljava/lang/String;)V" in data):
                mains.append(member[:-6].replace("/", "."))
named = [m for m in mains if m.rsplit(".", 1)[-1] == {public!r}]
main = (named or [m for m in mains if m == "Main"] or mains or [""])[0]
if not main:
    sys.stderr.write("error: no class declares public static void main(String[])\\n")
    os._exit(1)
_out(main.encode() + b"\\n" + jar.getvalue())
os._exit(0)
"""
)

_COMPILE_PYTHON = (
    _PRELUDE
    + """
import traceback
try:
    compile(bytes.fromhex({source}).decode("utf-8"), "main.py", "exec")
except BaseException as e:
    sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    sys.stderr.flush()
    os._exit(1)
os._exit(0)
"""
)

_RUN_MAIN = """\
    status = 0
    try:
        exec(compile(source, "main.py", "exec"), scope)
<<AFTER>>    except SystemExit as e:
        if e.code is None or type(e.code) is int:
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException as e:
        try:
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        except BaseException:
            pass
        status = 1
<<FINALIZE>>    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(status & 0xFF)
"""
"""How a candidate's Python program runs in its child, as ``python main.py`` runs it: its
source executed in ``scope``, its exit status that of `SystemExit` (1 for an exception, its
traceback on stderr), then its non-daemon threads waited for and its atexit functions run
(`threading.Thread(target=main).start()` prints after the main module ended), its streams
flushed. One execution's driver runs a function's call after it; a batch driver does not."""
_RUN_MAIN = _RUN_MAIN.replace(
    "<<FINALIZE>>",
    '    sys.modules["tracegen.sandbox._harness"].finalize()'
    "  # its threads, its atexit functions\n",
)
_RUN_MAIN_ONCE = _RUN_MAIN.replace("<<AFTER>>", "        {after}\n")
_RUN_MAIN_BATCH = _RUN_MAIN.replace("<<AFTER>>", "")


_RUN = (
    _PRELUDE
    + """
_init = sys.modules["tracegen.sandbox._init"]
_stdin = os.open({stdin}, os.O_RDONLY)
os.dup2(_stdin, 0)
os.close(_stdin)
_output = {output_file}
_init.limit(resource.RLIMIT_CPU, {cpu})  # SIGKILL at the limit: no handler answers late

def _program():
    import builtins, io, traceback
    builtins.exit = builtins.quit = sys.exit  # what `site` gives `python main.py`
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.argv = ["main.py", *{argv}]
    with open("main.py", "rb") as f:
        source = f.read().decode("utf-8")
    # A real module, as `python main.py` makes it: pickle, multiprocessing and typing find
    # what it defines by the name its classes carry; its directory imports by name.
    _module = type(sys)({module})
    _module.__file__ = os.path.abspath("main.py")
    _module.__builtins__ = __builtins__
    sys.modules[{module}] = _module
    sys.path.insert(0, os.getcwd())
    scope = _module.__dict__
"""
    + _RUN_MAIN_ONCE
    + """
_init.become_init()  # see `tracegen.sandbox._init`
pid = os.fork()
if pid == 0:
    try:
        _init.dumpable()
        if _output is not None:
            os.dup2(os.open("/dev/null", os.O_WRONLY), 1)
        _program()
    finally:
        os._exit(70)
_init.end_with(pid, _output)
"""
)
"""The driver of a Python program's run; this process stays the execution's init."""

_RUN_BINARY = """\
import sys
sys.modules["tracegen.sandbox._init"].run_binary(
    ["./prog", *{argv}], stdin={stdin}, output={output_file}, cpu_s={cpu}, stack={memory}
)
"""
"""The driver of a binary's run: the init of `tracegen.sandbox._init`, already compiled in the
zygote (the driver of `_RUN` costs each test about 200 page copies and 1-2 ms of CPU more)."""

_RUN_JAVA = (
    _PRELUDE
    + """
_java = {java}
_java.insert(1, "-Xmx%dm" % _heap({memory} >> 20))  # its heap: the memory limit
sys.modules["tracegen.sandbox._init"].run_binary(
    _java + {argv}, stdin={stdin}, output={output_file}, cpu_s={cpu}, stack=0,
    env=dict(os.environ, **{java_env}),
)
"""
)
"""The driver of a JVM's run, whose heap is the memory limit."""

_FUNCTIONAL_CALL = """\
import json as _json
_entry = {entry!r}.split(".")
_target = scope[_entry[0]]
if len(_entry) > 1:
    _target = getattr(_target(), _entry[1])
_args = _json.loads(bytes.fromhex({args}))
_value = _target(*_args)
if isinstance(_value, tuple):
    _value = list(_value)
_text = _json.dumps(_value).encode()
sys.stdout.flush()
_view = memoryview(b"\\n" + {marker!r} + _text)
while _view:
    _view = _view[os.write(1, _view):]"""

_BATCH = (
    _PRELUDE
    + """
import ctypes, select, signal, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # not dumpable: its programs cannot read or trace it
# The subreaper of every process a test's run starts: each is reaped here once it ends, so
# a run's CPU is that of all its processes (see `_RUN`).
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
_binary = {binary}
_memory = {memory}
_cap = {cap}
_children = "/proc/self/task/%d/children" % os.getpid()

def _reap_all():
    for _ in range(10000):
        try:
            with open(_children, "rb") as f:
                left = [int(p) for p in f.read().split()]
        except OSError:
            return
        if not left:
            return
        for p in left:
            try:
                os.kill(p, 9)
            except OSError:
                pass
        for p in left:
            try:
                os.waitpid(p, 0)
            except ChildProcessError:
                pass

def _cpu_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

if _binary:  # inherited by each spawned run; one that raises them is caught by its rusage
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # the driver's own time is not a test's
    for _which, _value in ((resource.RLIMIT_STACK, _memory), (resource.RLIMIT_CPU, {cpu})):
        _hard = resource.getrlimit(_which)[1]
        if _hard != resource.RLIM_INFINITY:
            _value = min(_value, _hard)
        resource.setrlimit(_which, (_value, _hard))

try:  # its hard CPU limit set from here; a confinement may refuse another process's limits
    resource.prlimit(os.getpid(), resource.RLIMIT_CPU)
    _spawn = True
except OSError:  # then forked, each sets its own
    _spawn = False

def _child(w_out, w_err):
    os.setpgid(0, 0)
    fd = os.open("stdin.txt", os.O_RDONLY)
    os.dup2(fd, 0)
    os.dup2(w_out, 1)
    os.dup2(w_err, 2)
    # Not the directory the standard library is imported through (a prefix its uid
    # cannot reach: `/proc/self/fd/N`); every other descriptor of the driver.
    _keep = sys.base_prefix[14:].partition("/")[0] if sys.base_prefix.startswith(
        "/proc/self/fd/") else ""
    _keep = int(_keep) if _keep.isdigit() else 1024
    os.closerange(3, _keep)
    os.closerange(_keep + 1, 1024)
    _limit(resource.RLIMIT_CPU, {cpu})  # SIGKILL at the limit: no handler answers late
    if _binary:
        _limit(resource.RLIMIT_STACK, _memory)
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        os.execv("./prog", ["./prog"])
    import builtins, io, traceback
    builtins.exit = builtins.quit = sys.exit
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)))
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    sys.argv = ["main.py"]
    with open("main.py", "rb") as f:
        source = f.read().decode("utf-8")
    # A real module, as `python main.py` makes it (see `_RUN`).
    _module = type(sys)("__main__")
    _module.__file__ = os.path.abspath("main.py")
    _module.__builtins__ = __builtins__
    sys.modules["__main__"] = _module
    sys.path.insert(0, os.getcwd())
    scope = _module.__dict__
"""
    + _RUN_MAIN_BATCH
    + """
def _emit(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]

for _index, _data in enumerate({inputs}):
    _put("stdin.txt", _data)
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    started = time.monotonic()
    cpu_before = _cpu_of_children()
    if _binary and _spawn:  # spawned without copying the driver: the limits are its own soft ones
        pid = os.posix_spawn("./prog", ["./prog"], {{}}, setpgroup=0,
                             setsigdef=(signal.SIGXCPU,), file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "stdin.txt", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, w_out, 1),
            (os.POSIX_SPAWN_DUP2, w_err, 2),
        ])
        try:  # SIGKILL at its CPU limit: a SIGXCPU could be caught, and answered from
            resource.prlimit(pid, resource.RLIMIT_CPU, ({cpu}, {cpu}))
        except ProcessLookupError:  # it has ended already
            pass
    else:
        pid = os.fork()
        if pid == 0:
            try:
                _child(w_out, w_err)
            finally:
                os._exit(127)
    os.close(w_out)
    os.close(w_err)
    got = {{r_out: bytearray(), r_err: bytearray()}}
    reading = [r_out, r_err]
    killed = "-"
    deadline = started + {wall}
    while reading and killed == "-":
        left = deadline - time.monotonic()
        ready = select.select(reading, [], [], left)[0] if left > 0 else []
        if not ready:
            killed = "timeout"
            break
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                os.close(fd)
                reading.remove(fd)
                continue
            got[fd] += chunk
            if len(got[fd]) > _cap:
                killed = "output-limit"
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status, usage = os.wait4(pid, 0)
    _reap_all()  # what it left running: killed, and its CPU counted with the run's
    for fd in reading:
        os.close(fd)
    out = bytes(got[r_out][:_cap])
    err = bytes(got[r_err][:_cap])
    code = os.waitstatus_to_exitcode(status)
    if usage.ru_maxrss * 1024 > _memory and killed == "-":
        killed = "memory"
    _emit(b"%d %d %.6f %.6f %s %d %d\\n" % (
        _index, code, _cpu_of_children() - cpu_before, time.monotonic() - started,
        killed.encode(), len(out), len(err)) + out + err)
    if killed != "-" or code != 0:
        break
os._exit(0)
"""
)

RESULT_MARKER: Final = b"\x00tracegen-result\x00"
"""Precedes a functional test's JSON value on stdout (what the program printed comes before)."""


@functools.cache
def compiler_identity(language: Language) -> str:
    """What tells one installed compiler from another: its real path, size and time, and
    for Java those of the JDK's class library."""
    if language == "cpp":
        found = shutil.which("g++")
        paths = [os.path.realpath(found)] if found else []
    elif language == "java":
        home = java_home()
        paths = [f"{home}/bin/javac", f"{home}/lib/modules"] if home else []
    else:
        return language
    marks = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        marks.append(f"{path}:{info.st_size}:{info.st_mtime_ns}")
    return " ".join(marks)


class Programs:
    """Builds and runs programs in ``sandbox``; built programs are cached by source hash,
    in memory and, with ``disk``, on disk for other processes (`BuildCache`)."""

    def __init__(self, sandbox: ProcessRunner, disk: BuildCache | None = None) -> None:
        self.sandbox = sandbox
        self.disk = disk
        self._built: OrderedDict[str, Built] = OrderedDict()
        self._building: dict[str, asyncio.Future[Built]] = {}
        self.compilations = 0
        self._jvm: dict[int, bool] = {}
        owner: object = sandbox
        while not hasattr(owner, "limits") and hasattr(owner, "runner"):
            owner = owner.runner  # a wrapper (counting executions) around the sandbox
        limits = getattr(owner, "limits", None)
        self.file_bytes: int | None = limits.file_size_mb << 20 if limits is not None else None
        """The largest file an execution may write (its input, its binary)."""
        self.isolation: str = getattr(owner, "isolation", "rlimit")

    @classmethod
    def cached_on_disk(cls, sandbox: ProcessRunner) -> Programs:
        """Programs whose builds are also kept on disk (`BuildCache`) where the sandbox's
        executions cannot write there."""
        programs = cls(sandbox)
        programs.disk = BuildCache.for_isolation(programs.isolation)
        return programs

    @staticmethod
    def key(source: str, language: Language) -> str:
        command: str = language
        if language == "cpp":
            command = " ".join(CPP_COMMAND)
        elif language == "java":
            command = " ".join((java_home() or "", *JAVA_FLAGS))
        identity = compiler_identity(language)
        text = f"{language}\0{command}\0{identity}\0{source}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    async def build(self, source: str, language: Language) -> Built:
        """The built program (cached; concurrent builds of the same source wait for one)."""
        key = self.key(source, language)
        if (built := self._built.get(key)) is not None:
            self._built.move_to_end(key)
            return built
        if (pending := self._building.get(key)) is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Built] = asyncio.get_running_loop().create_future()
        self._building[key] = future
        try:
            built = self._from_disk(key, source, language)
            if built is None:
                built = await self._compile(source, language)
                if self.disk is not None and built.binary is not None and built.failure is None:
                    self.disk.put(key, built.binary, built.main)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: waiters see it, nobody is warned
            raise
        finally:
            self._building.pop(key, None)
        future.set_result(built)
        if built.failure is None:
            self._built[key] = built
            if len(self._built) > CACHE_SIZE:
                self._built.popitem(last=False)
        return built

    def _from_disk(self, key: str, source: str, language: Language) -> Built | None:
        if self.disk is None or language == "python":
            return None
        if (found := self.disk.get(key)) is None:
            return None
        binary, main = found
        if language == "java" and (main is None or not _JAVA_CLASS.fullmatch(main)):
            return None
        return Built(language, source, binary=binary, main=main)

    async def _compile(self, source: str, language: Language) -> Built:
        self.compilations += 1
        encoded = _literal(source.encode("utf-8", "surrogatepass"))
        if language == "java":
            if (home := java_home()) is None:
                return Built(language, source, failure="cannot compile Java: no javac")
            file = java_source_name(source)
            driver = _COMPILE_JAVA.format(
                source=encoded,
                file=repr(file),
                public=file[:-5],
                heap=JAVAC_HEAP_MB,
                command=javac_command(home, file),
                java_env=repr(JAVA_ENV),
            )
            output = BINARY_LIMIT
        elif language == "cpp":
            if (missing := compiler_missing("cpp")) is not None:
                return Built(language, source, failure=f"cannot compile C++: {missing}")
            driver = _COMPILE_CPP.format(
                source=encoded, memory=COMPILE_MEMORY_MB << 20, command=list(CPP_COMMAND)
            )
            output = BINARY_LIMIT
        else:
            driver = _COMPILE_PYTHON.format(source=encoded)
            output = 1 << 16
        run = await self.sandbox.run_process(
            driver,
            timeout_s=COMPILE_TIMEOUT_S,
            output_bytes=output,
            memory_mb=COMPILE_MEMORY_MB,
            toolchain=True,
        )
        stderr = run.stderr.decode(errors="replace").strip()
        if run.killed_for == "error":
            return Built(language, source, failure="the sandbox failed while compiling")
        if run.killed_for == "memory":
            return Built(language, source, error="compilation stopped: out of memory")
        if run.killed_for == "timeout" or run.signal is not None:
            why = "the compiler ran out of time" if run.killed_for else f"signal {run.signal}"
            return Built(language, source, error=f"compilation stopped: {why}")
        if run.killed_for == "output-limit":
            return Built(language, source, error="compilation made too large a binary")
        if language == "java" and run.exit_code != 0 and not _JAVAC_SAID.search(stderr):
            # javac names the source file and line of every error of the program's own.
            return Built(language, source, failure=f"javac failed: {stderr[-300:]}")
        if run.exit_code != 0:
            return Built(language, source, error=stderr or f"exit status {run.exit_code}")
        if language == "cpp":
            if not run.stdout:
                return Built(language, source, failure="the compiler produced no binary")
            return Built(language, source, binary=run.stdout)
        if language == "java":
            main, _, jar = run.stdout.partition(b"\n")
            name = main.decode(errors="replace")
            if not jar or not _JAVA_CLASS.fullmatch(name):
                return Built(language, source, failure="the compiler produced no jar")
            return Built(language, source, binary=jar, main=name)
        return Built(language, source)

    async def jvm_starts(self, limits: Limits) -> bool:
        """Whether a JVM starts here under ``limits`` (``java -version``: no program of
        anyone's; asked once per memory limit)."""
        if (known := self._jvm.get(limits.memory_mb)) is None:
            probe = Built("java", "", binary=b"", main="-version")
            run = await self.run(probe, stdin=b"", limits=limits)
            known = self._jvm[limits.memory_mb] = run.exit_code == 0 and run.killed_for is None
        return known

    async def run_batch(
        self, built: Built, inputs: list[bytes], limits: Limits, cap: int
    ) -> list[ProcessRun]:
        """Run ``built`` on each of ``inputs`` (on stdin) in one execution: a process per
        input, forked by a driver its programs can neither read nor trace, under ``limits``
        each and ``cap`` bytes of output. Ends at the first input whose run does not exit 0
        in time; the runs reported, in order (fewer than ``inputs`` if it ended early or the
        execution failed: the caller runs the rest alone with `run`)."""
        if built.language == "java":
            return []  # a JVM per test as `run` starts it
        # Written by the execution before the driver runs, as `run` hands them over.
        files: list[tuple[str, bytes, int]] = []
        if built.binary is not None:
            files.append(("prog", built.binary, 0o700))
        else:
            files.append(("main.py", built.source.encode("utf-8", "surrogatepass"), 0o600))
        driver = _BATCH.format(
            binary=built.binary is not None,
            memory=limits.memory_mb << 20,
            cap=cap,
            cpu=max(1, math.ceil(limits.cpu_s)),
            wall=limits.wall_s,
            inputs=repr([data.hex() for data in inputs]),
        )
        run = await self.sandbox.run_process(
            driver,
            timeout_s=len(inputs) * (limits.wall_s + 0.5) + 2,
            output_bytes=len(inputs) * (2 * cap + 128) + 4096,
            memory_mb=limits.memory_mb,
            files=files,
        )
        if run.killed_for is not None or run.exit_code != 0 or run.signal is not None:
            return []
        return _batch_records(run.stdout, len(inputs), cap)

    async def run(
        self,
        built: Built,
        *,
        stdin: bytes,
        limits: Limits,
        input_file: str | None = None,
        output_file: str | None = None,
        argv: tuple[str, ...] = (),
        extra_files: tuple[tuple[str, bytes], ...] = (),
        call: tuple[str, list[object]] | None = None,
    ) -> ProcessRun:
        """Run ``built`` once: ``stdin`` on standard input, or written to ``input_file``;
        ``call`` (entry point, arguments) calls a Python program's function and prints its
        value after `RESULT_MARKER`."""
        # Written by the execution before the driver runs: never parsed as its source.
        files: list[tuple[str, bytes, int]] = []
        java = None
        if built.language == "java":
            home = java_home()
            files.append(("prog.jar", built.binary or b"", 0o600))
            java = [os.path.join(home or "", "bin", "java"), *JAVA_FLAGS, "-cp", "prog.jar"]
            java.append(built.main or "Main")
        elif built.binary is not None:
            files.append(("prog", built.binary, 0o700))
        else:
            files.append(("main.py", built.source.encode("utf-8", "surrogatepass"), 0o600))
        files.append((input_file or "stdin.txt", stdin, 0o600))
        files += [(name, content, 0o600) for name, content in extra_files]
        after = "pass"
        module = "__main__"
        if call is not None:
            entry, args = call
            import orjson

            encoded = _literal(orjson.dumps(args))
            after = _FUNCTIONAL_CALL.format(entry=entry, args=encoded, marker=RESULT_MARKER)
            after = after.replace("\n", "\n        ")
            module = "solution"
        common = {
            "stdin": repr("/dev/null" if input_file else "stdin.txt"),
            "output_file": repr(output_file),
            "cpu": max(1, math.ceil(limits.cpu_s)),
            "memory": limits.memory_mb << 20,
            "argv": repr(list(argv)),
        }
        if java is not None:
            driver = _RUN_JAVA.format(java=repr(java), java_env=repr(JAVA_ENV), **common)
        elif built.binary is not None:
            driver = _RUN_BINARY.format(**common)
        else:
            driver = _RUN.format(module=repr(module), after=after, **common)
        # The limits bound the whole execution: every process the program starts, the CPU
        # of those that ended too, and all the memory they hold (not what they reserve).
        return await self.sandbox.run_process(
            driver,
            timeout_s=limits.wall_s,
            output_bytes=limits.output_bytes,
            cpu_s=limits.cpu_s,
            memory_mb=limits.memory_mb,
            files=files,
            launcher=java is not None or built.binary is not None,
        )


def _batch_records(data: bytes, count: int, cap: int) -> list[ProcessRun]:
    """The runs a batch driver reported (``INDEX EXIT CPU WALL KILLED OUT ERR`` then the
    output and error bytes); reading stops at anything malformed."""
    runs: list[ProcessRun] = []
    at = 0
    while at < len(data) and len(runs) < count:
        end = data.find(b"\n", at, at + 200)
        if end < 0:
            break
        try:
            index, code, cpu, wall, killed, n_out, n_err = data[at:end].split()
            numbers = int(index), int(code), float(cpu), float(wall), int(n_out), int(n_err)
        except ValueError:
            break
        i, exit_code, cpu_s, wall_s, out_len, err_len = numbers
        if i != len(runs) or not (0 <= out_len <= cap and 0 <= err_len <= cap):
            break
        body = data[end + 1 : end + 1 + out_len + err_len]
        if len(body) != out_len + err_len:
            break
        why = killed.decode()
        runs.append(
            ProcessRun(
                exit_code=exit_code if exit_code >= 0 else None,
                signal=-exit_code if exit_code < 0 else None,
                cpu_s=cpu_s,
                wall_s=wall_s,
                stdout=body[:out_len],
                stderr=body[out_len:],
                # "memory": more resident than allowed; reported as a stop of the sandbox,
                # so the test is run again alone, under the hard limits.
                killed_for="timeout"
                if why == "timeout"
                else "output-limit"
                if why == "output-limit"
                else "error"
                if why == "memory"
                else None,
            )
        )
        at = end + 1 + out_len + err_len
    return runs
