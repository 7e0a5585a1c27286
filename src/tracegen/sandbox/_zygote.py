"""The sandbox's zygote: a warm interpreter that forks every execution. Standard library only.

It never runs generated code itself. It starts under ``python -I -S`` (inside bubblewrap,
or after entering its own namespaces for the built-in isolation), preloads the standard
library and, for each request from tracegen, forks:

- a **candidate** process (or, for `Sandbox.run_code`, a script process) that starts a new
  session, takes its pipes, applies the rlimits, moves into a fresh working directory,
  drops to the slot's unprivileged uid, is confined (Landlock, seccomp) and only then
  reads the code (`tracegen.sandbox._harness`);
- for tests, the execution is handed to a **judge**: a long-lived process of its own
  (another uid when running as root, its own Landlock domain, not dumpable) that holds the
  tests and calls the candidate through pipes. A judge serves one execution at a time and
  is replaced when killed or after `JUDGE_RUNS` executions.

When the judge is done (or the script has exited), every process left of the execution is
killed and its directory removed before tracegen is told the execution is over.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import importlib
import importlib.machinery
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from tracegen.sandbox import _confine, _harness, _init  # noqa: F401 (imported for executions)

PRELOAD = [
    "bisect",
    "collections",
    "decimal",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "operator",
    "re",
    "string",
    "typing",
]
"""Imported once here for every execution. Not ``random`` (nor ``statistics``, which imports
it): it reseeds itself in every forked child, which costs each execution more (about 45
page copies) than importing it costs the programs that use it."""
JUDGE_RUNS = 1000
"""A judge is replaced after this many executions, so nothing accumulates in it for long."""
PROBER_TIMEOUT_S = 2.0
"""A prober that has not answered for this long is killed and replaced."""
MALLOC_ARENAS = 2
"""At most this many malloc arenas per process (``M_ARENA_MAX``; glibc's default is eight per
core): each reserves 64 MB of address space, which the address-space fallback (where no
cgroup counts memory: `ADDRESS_SPACE_BACKSTOP`) and the judges' limit count."""
WATCH_S = 0.02
"""How often the CPU of an execution's running processes (and, where no cgroup counts it,
the memory they hold) is added up, while it runs."""
ADDRESS_SPACE_BACKSTOP = 8
"""Where no cgroup bounds an execution's memory, each of its processes may reserve this many
times the memory limit of address space (at least 8 GB): the sum of what they hold is
watched instead (`WATCH_S`), and this only stops one from taking the host's memory between
two looks."""
_M_ARENA_MAX = -8
_PROBER_PRIVILEGED = 72
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MB = 1024 * 1024
_FD = struct.Struct("i")
_FORK = struct.Struct("=cQIB8s")  # b"f", run id, uid, tests?, the name's random part
_END = struct.Struct("=ci")  # b"e", pid
_EXIT = struct.Struct("=iidBBQ")  # pid, status, CPU s, killed by tracegen?, alone?, max RSS kB
_SIGCHLD = int(signal.SIGCHLD)
_MEMORY_FILES = ("memory.max", "memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
_signal = importlib.import_module("_signal")  # `signal.signal` without its enum wrapping
_libc = ctypes.CDLL(None, use_errno=True)


def _on_signal(*_: object) -> None:
    """The SIGCHLD handler (its wake-up fd does the work). A function of the module, not a
    lambda: every child replaces it, and the last reference to a lambda would free it there,
    writing to the pages it and its parts lie on."""


# ------------------------------------------------------------------ the uid cleanup helper


def _emptied(uid: int, own_uid: int) -> bool:
    """Kill every process of ``uid``; whether none is left (zombies count until reaped).

    The kill goes out with ``uid`` as effective uid, so it reaches exactly that uid's
    processes, and ``own_uid``, which no process has, as real uid: none of them can signal
    back, so code fighting its cleanup cannot stop or kill the helper half-way. ``kill(-1)``
    walks the process list with forks held off: every process of the uid is doomed at once,
    and none can start another. Then the probe, as the uid itself: under ``RLIMIT_NPROC`` 2
    a clone succeeds only while the caller is its real uid's only process. The clone is
    ``posix_spawn``'s vfork-like one, and exec of ``""`` fails at once, so a success costs
    microseconds.
    """
    os.setresuid(own_uid, uid, 0)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    os.setresuid(uid, uid, 0)
    try:
        pid = os.posix_spawn("", ["probe"], {})
    except FileNotFoundError:
        return True
    except BlockingIOError:
        return False
    os.waitpid(pid, 0)
    return False


def _prober(sock: socket.socket, own_uid: int) -> None:
    """Serve requests ``uid`` -> the same ``uid`` once that uid has no process left.

    It keeps root as saved uid to come back (`_emptied` says which uids it takes on): the
    processes it kills cannot signal it before they are doomed, nor ptrace or otherwise
    change it, and its ``kill(-1)`` reaches only them.
    """
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    os.closerange(3, sock.fileno())
    os.closerange(sock.fileno() + 1, 1 << 20)
    resource.setrlimit(resource.RLIMIT_NPROC, (2, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
    os.setresuid(own_uid, own_uid, 0)
    with contextlib.suppress(PermissionError):
        os.kill(os.getppid(), 0)
        os._exit(_PROBER_PRIVILEGED)  # its kill(-1) under a uid would hit the zygote
    os.setresuid(0, 0, 0)
    while data := sock.recv(64):
        uid = int(data)
        while not _emptied(uid, own_uid):
            time.sleep(0.0005)
        os.setresuid(0, 0, 0)
        sock.send(data)


# ------------------------------------------------------------------ imports through a handle


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


def _remove_tree(path: str) -> None:
    """``shutil.rmtree(path, ignore_errors=True)`` without importing shutil (and with it
    lzma, bz2 and zlib, whose mappings every fork would copy)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _high_fd(fd: int) -> int:
    """``fd`` moved clear of the low numbers children use (closed on exec)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    os.close(fd)
    return high


def _passed_fds(fds: list[int]) -> tuple[int, int, bytes]:
    """The ancillary item that passes ``fds`` over a unix socket."""
    return socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds)


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors that came with a message (see `_passed_fds`)."""
    fds: list[int] = []
    for _, _, payload in ancillary:
        fds += memoryview(payload)[: len(payload) - len(payload) % _FD.size].cast("i")
    return fds


def _gaps(keep: set[int]) -> list[tuple[int, int]]:
    """The ``closerange`` arguments that close every descriptor but ``keep``."""
    ends = sorted(keep)
    return [(low + 1, high) for low, high in zip(ends, [*ends[1:], 1 << 20], strict=True)]


# ------------------------------------------------------------------ confinement


def _confinement(config: dict[str, Any]) -> tuple[_confine.Confinement, set[int]]:
    """The built-in isolation's `Confinement` (nothing but ``no_new_privs`` under bwrap or
    rlimit) and the ``O_PATH`` fds its rules name, which children close once confined."""
    abi = int(config.get("landlock", 0))
    read_only: list[int] = []
    files: list[tuple[int, int]] = []
    if abi and not config.get("scope_only"):
        for path in config["read_only"]:
            try:
                fd = _high_fd(os.open(path, os.O_PATH))
            except OSError:
                continue
            if os.path.isdir(path):
                read_only.append(fd)
            else:
                files.append((fd, _confine.FS_READ_FILE | _confine.FS_EXECUTE))
        for path, write in (("/dev/null", True), ("/dev/zero", False), ("/dev/urandom", False)):
            with contextlib.suppress(OSError):
                access = _confine.FS_READ_FILE | (_confine.FS_WRITE_FILE if write else 0)
                files.append((_high_fd(os.open(path, os.O_PATH)), access))
    confinement = _confine.Confinement(
        landlock=abi,
        read_only=read_only,
        files=files,
        seccomp=bool(config.get("seccomp")),
        drop_caps=config.get("namespaces") == "user" or bool(config.get("drop_caps")),
        scope_only=bool(config.get("scope_only")),
    )
    return confinement, {*read_only, *(fd for fd, _ in files)}


# ------------------------------------------------------------------ SysV IPC


def _ipc_limits(memory_mb: int) -> list[tuple[str, bytes]]:
    """The sysctls of an execution's IPC namespace: what its SysV objects may hold.

    Shared memory at most ``memory_mb`` in all (what it may have attached at once anyway);
    16 message queues of the kernel's default 16 kB; 16 sets of at most 64 semaphores.
    """
    pages = memory_mb * _MB // os.sysconf("SC_PAGE_SIZE")
    return [
        ("/proc/sys/kernel/shmall", b"%d" % pages),
        ("/proc/sys/kernel/msgmni", b"16"),
        ("/proc/sys/kernel/sem", b"64 1024 64 16"),  # per set, in all, per call, sets
    ]


def _ipc_per_execution(limits: list[tuple[str, bytes]]) -> list[tuple[str, bytes]] | None:
    """Whether each execution can get an IPC namespace of its own here, tried in a child.

    ``None``: it cannot (no ``CAP_SYS_ADMIN``: rlimit-only without root). Else the sysctls
    of ``limits`` its children can write there: all of them (root), or none (a user
    namespace, where they belong to the host's root).
    """
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            if _libc.unshare(_CLONE_NEWIPC) == 0:
                code = 1
                _write_sysctls(limits)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return limits if code == 0 else [] if code == 1 else None


def _empty(path: bytes, value: bytes) -> None:
    """Write ``value`` to a cgroup's emptying file (``memory.force_empty``, ``memory.reclaim``)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, value)
    except OSError:
        pass  # v2: EAGAIN when less than asked could be reclaimed
    finally:
        os.close(fd)


def _write_sysctls(files: list[tuple[str, bytes]]) -> None:
    for path, value in files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value)
        finally:
            os.close(fd)


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the children of each of its threads)."""
    found, at = [pid], 0
    while at < len(found):
        parent = found[at]
        at += 1
        try:
            tasks = os.listdir(b"/proc/%d/task" % parent)
        except OSError:
            continue
        for task in tasks:
            try:
                with open(b"/proc/%d/task/%s/children" % (parent, task), "rb") as f:
                    found += map(int, f.read().split())
            except OSError:
                continue
    return found


def _resident(pid: int) -> int:
    """Bytes of anonymous and shared memory resident in ``pid`` (``RssAnon`` +
    ``RssShmem``: counters, cheap to read), pages it shares with others counted whole."""
    try:
        with open(b"/proc/%d/status" % pid, "rb") as f:
            text = f.read()
    except OSError:
        return 0
    held = 0
    for name in (b"\nRssAnon:", b"\nRssShmem:"):
        at = text.find(name)
        if at >= 0:
            with contextlib.suppress(ValueError, IndexError):
                held += int(text[at + len(name) :].split(None, 1)[0]) * 1024
    return held


def _proportional(pid: int) -> int | None:
    """Bytes of anonymous and shared memory ``pid`` holds, pages it shares with others
    divided among them (``Pss_Anon`` + ``Pss_Shmem``; the kernel walks its page tables:
    milliseconds for a large process); None where that cannot be read."""
    try:
        with open(b"/proc/%d/smaps_rollup" % pid, "rb") as f:
            text = f.read()
    except OSError:
        return None
    held = 0
    for name in (b"\nPss_Anon:", b"\nPss_Shmem:"):
        at = text.find(name)
        if at < 0:
            return None
        try:
            held += int(text[at + len(name) :].split(None, 1)[0]) * 1024
        except (ValueError, IndexError):
            return None
    return held


# ------------------------------------------------------------------ the zygote


class _Run:
    __slots__ = (
        "cpu_limit",
        "cpu_s",
        "id",
        "judge",
        "judge_state",
        "killed",
        "left_nothing",
        "max_rss",
        "memory_limit",
        "over",
        "own_files",
        "pid",
        "seen_cpu",
        "status",
        "token",
        "uid",
        "workdir",
    )

    def __init__(self, run_id: int, uid: int, workdir: str) -> None:
        self.id, self.uid, self.workdir = run_id, uid, workdir
        self.pid = -1
        self.status: int | None = None
        self.cpu_s = 0.0
        self.cpu_limit = 0.0  # seconds, all its processes together
        self.memory_limit = 0  # bytes, all it holds together
        self.seen_cpu = 0.0  # the most its processes were seen to have used together
        self.max_rss = 0  # bytes: the largest of its processes that ended and were reaped
        self.over: str | None = None  # "cpu" or "memory": the watch killed it for that
        self.killed = False
        self.left_nothing = False  # no process of it was left when it ended
        self.judge: _Judge | None = None
        self.judge_state: str | None = None  # "busy", "done" or "died"
        self.token = b""
        # Descriptors of the tmpfs it mounted (working directory, /dev/shm), which it sends
        # (`_own_namespaces`) where the watch counts its files (`_held`).
        self.own_files: list[int] = []


class _Judge:
    __slots__ = ("pid", "run", "served", "sock", "workdir")

    def __init__(self, pid: int, sock: socket.socket, workdir: str) -> None:
        self.pid, self.sock, self.workdir = pid, sock, workdir
        self.run: _Run | None = None
        self.served = 0


class Zygote:
    """Forks one child per request and reports each once nothing of it is left.

    Its loop is lean on purpose: after every fork each page of the zygote it writes to is
    copied (or at least faulted), so requests and reports are short text messages, not
    JSON, and the loop polls epoll directly and learns of exits from SIGCHLD.
    """

    def __init__(self, sock: socket.socket, config: dict[str, Any]) -> None:
        self.sock = sock
        self.drop = bool(config["drop"])
        self.judge_uid = int(config["judge_uid"]) if self.drop else -1
        self.prober_uid = int(config["prober_uid"]) if self.drop else -1
        self.workbase = config["workbase"]
        self.limits: dict[str, int] = config["limits"]
        # SysV shared memory, message queues and semaphores die with the execution's own
        # IPC namespace, unseen by any other; the host's memory is not theirs to keep.
        self.ipc = _ipc_per_execution(_ipc_limits(self.limits["memory_mb"]))
        # Bound here: looked up in a child, the function would be made there, page by page.
        self.unshare_ipc = (_libc.unshare, ctypes.c_int(_CLONE_NEWIPC))
        self.mounts: socket.socket | None = None  # see below
        self.mounts_out: socket.socket | None = None
        self._per_execution(config)
        os.environ.clear()
        os.environ.update(config["env"])
        self.prefix_fd = -1
        if config["remap_prefix"]:
            # The children's uid cannot traverse to the interpreter (a pyenv under /root):
            # they import through this directory fd instead, with the finders warmed here.
            self.prefix_fd = _high_fd(os.open(sys.base_prefix, os.O_RDONLY | os.O_DIRECTORY))
            packages = reroot_imports(sys.base_prefix, f"/proc/self/fd/{self.prefix_fd}")
            importlib.machinery.PathFinder.find_spec("_tracegen_warm_finders", sys.path + packages)
        self.confinement, self.confined_fds = _confinement(config.get("confine") or {})
        self.devnull = _high_fd(os.open(os.devnull, os.O_RDWR))
        # Where no cgroup counts an execution's memory, the watch counts its files too: each
        # execution sends here the tmpfs it mounted, before any of its code runs. Not looked
        # up through /proc/PID: its processes are not dumpable (nor traceable by this one,
        # as a normal user), and where it stands is no sign of where its files are.
        if self.own_mounts and not self.memory_cgroup:
            self.mounts, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.mounts.setblocking(False)
            self.mounts_out = socket.socket(fileno=_high_fd(theirs.detach()))
            self.confined_fds.add(self.mounts_out.fileno())  # closed before the code runs
        # Children set these three in place (see `_child`), without os.environ's machinery.
        os.environ.update(HOME="/", TMPDIR="/", PWD="/")
        self.putenv, self.environ = os.putenv, getattr(os.environ, "_data", {})
        self.keep = {self.prefix_fd, *self.confined_fds} - {-1}
        self.parent_pid = os.getpid()  # of the children forked next (see `_child`)
        self.gaps = {count: _gaps({*range(count), *self.keep}) for count in (4, 5)}
        limits, mb = self.limits, _MB
        judge_rlimits = [
            (resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2),
            (resource.RLIMIT_FSIZE, (limits["file_size_mb"] * mb,) * 2),
            (resource.RLIMIT_NPROC, (limits["processes"],) * 2),
            (resource.RLIMIT_NOFILE, (limits["open_files"],) * 2),
            (resource.RLIMIT_CORE, (0, 0)),
        ]
        # A judge lives across executions: the wall-clock timeout bounds it, not its CPU.
        cpu = (resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 1))
        # An execution's memory is what it holds, not what it reserves (thread stacks,
        # arenas, a runtime's reservations): its cgroup counts it, or else the watch adds
        # it up; the address space only backs the watch up (`ADDRESS_SPACE_BACKSTOP`).
        hard_as = resource.getrlimit(resource.RLIMIT_AS)[1]
        space = hard_as
        if not self.memory_cgroup:
            space = max(ADDRESS_SPACE_BACKSTOP * limits["memory_mb"], 8192) * mb
            space = space if hard_as == resource.RLIM_INFINITY else min(space, hard_as)
        own = [
            (resource.RLIMIT_AS, (space, space)) if name == resource.RLIMIT_AS else (name, limit)
            for name, limit in judge_rlimits
        ]
        if self.own_user:  # counted in its own user namespace: its own processes only
            own = [
                (resource.RLIMIT_NPROC, (limits["execution_processes"],) * 2) if
                name == resource.RLIMIT_NPROC else (name, limit) for name, limit in own
            ]  # fmt: skip
        self.rlimits = {True: judge_rlimits, False: [*own, cpu]}
        # Orphans of an execution become our children, so they are reaped, not left as zombies
        # that keep counting against the slot's process limit.
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, _on_signal)
        signal.set_wakeup_fd(wake_w)
        self.epoll = select.epoll()
        self.next_watch: float | None = None
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.handlers: dict[int, Callable[[], None]] = {}
        self._watch(sock.fileno(), self._on_request)
        self._watch(self.wake_r, self._on_wake)
        if self.mounts is not None:
            self._watch(self.mounts.fileno(), self._on_mounts)
        self.ancillary = socket.CMSG_SPACE(8 * _FD.size)
        self.runs: dict[int, _Run] = {}
        self.by_pid: dict[int, _Run] = {}
        self.judges: dict[int, _Judge] = {}
        self.idle: list[_Judge] = []
        self.closing = False
        self.prober: dict[str, Any] | None = None
        self.emptying: dict[int, int] = {}
        self.deadline: float | None = None

    def _per_execution(self, config: dict[str, Any]) -> None:
        """What each execution gets of its own here (see `_own_namespaces`), tried in a child.

        Under bubblewrap and the built-in isolation: a user namespace without root (where
        the kernel lets it make one), a mount namespace with its tmpfs where the zygote may
        mount them; as root, its cgroups (``config["cgroups"]``: the directories tracegen
        made for this zygote, one per controller, where each execution gets its own).
        """
        uid, gid = os.getuid(), os.getgid()
        self.cgroups = [base.encode() for base in config.get("cgroups") or ()]
        self.slots: dict[int, int] = {}  # uid -> the OOM kills its cgroup has seen
        self.cgroup_files = config.get("cgroup_files") or {}
        # Per base, its files that bound memory (memory.max; v1's memory.limit_in_bytes and
        # memory.memsw.limit_in_bytes), set to each execution's own limit (`_set_memory`).
        self.memory_files = {
            base: [f.encode() for f, _ in files if f in _MEMORY_FILES]
            for base, files in self.cgroup_files.items()
        }
        self.memory_cgroup = any(self.memory_files.values())
        self.slot_memory: dict[int, int] = {}  # uid -> the memory limit its cgroup has now
        self.user_maps = [
            ("/proc/self/setgroups", b"deny"),
            ("/proc/self/uid_map", b"%d %d 1" % (uid, uid)),
            ("/proc/self/gid_map", b"%d %d 1" % (gid, gid)),
        ]
        size = b"size=%dm,mode=0700" % config.get("tmp_mb", self.limits["memory_mb"])
        self.tmpfs_options = size + b",uid=%d,gid=%d" if self.drop else size
        self.home_on_tmp = config.get("isolation") == "bwrap"
        self.own_user = self.own_mounts = False
        if config.get("isolation") in ("bwrap", "builtin"):
            probe = os.path.join(self.workbase, f"probe-{os.urandom(8).hex()}")
            os.mkdir(probe, 0o700)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    if not self.drop:
                        self.own_user = True
                        with contextlib.suppress(OSError):
                            self.unshare_flags = _CLONE_NEWIPC
                            self.ipc, self.own_mounts = [], False
                            self._own_namespaces(0, probe)
                            code |= 1
                        self.own_user = bool(code & 1)
                    if self.own_user or self.ipc is not None:
                        with contextlib.suppress(OSError):
                            self.unshare_flags, self.own_mounts = _CLONE_NEWNS, True
                            self.ipc, self.cgroups = [], []
                            self._own_namespaces(0, probe)
                            code |= 2
                        if self.own_user:
                            with contextlib.suppress(OSError):
                                self.unshare_flags = _CLONE_NEWIPC
                                _write_sysctls(_ipc_limits(self.limits["memory_mb"]))
                                code |= 4
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            os.rmdir(probe)
            code = os.waitstatus_to_exitcode(status)
            self.own_user, self.own_mounts = bool(code & 1), bool(code & 2)
            if self.own_user:
                self.ipc = _ipc_limits(self.limits["memory_mb"]) if code & 4 else []
        self.unshare_flags = (_CLONE_NEWIPC if self.ipc is not None else 0) | (
            _CLONE_NEWNS if self.own_mounts else 0
        )

    def run_dir(self, run_id: int, token: bytes) -> str:
        """An execution's directory: its name holds 64 random bits no execution can guess."""
        return f"{self.workbase}/run-{run_id}-{token.hex()}"

    def _make_cgroups(self, run: _Run) -> None:
        """The cgroups of the execution's slot (its uid), with its limits, made on the slot's
        first use (see `_own_namespaces`).

        One per slot, not per execution: making and removing a memory cgroup costs more
        CPU than a whole execution may (0.3–1 ms here). Between two executions a slot's
        cgroups hold no process (the end is reported once none is left) and no memory of
        the one before but its cache of files it read, which the kernel reclaims first.
        """
        if run.uid in self.slots:
            return
        for base in self.cgroups:
            path = b"%s/slot-%d" % (base, run.uid)
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
            for file, value in self.cgroup_files.get(base.decode(), ()):
                fd = os.open(b"%s/%s" % (path, file.encode()), os.O_WRONLY)
                try:
                    os.write(fd, value.encode())
                finally:
                    os.close(fd)
        self.slots[run.uid] = 0

    def _set_memory(self, run: _Run) -> None:
        """Bound the slot's cgroup to the execution's own memory limit (when it changes).

        v1 wants memory with swap never below memory alone: raised, memsw is written first;
        lowered, last. A limit the kernel refuses (the slot holds more than that of a file
        cache it cannot reclaim) leaves the slot's last one, at most the sandbox's, and is
        tried again by the next execution.
        """
        limit = run.memory_limit
        if self.slot_memory.get(run.uid) == limit:
            return
        raising = limit > self.slot_memory.get(run.uid, self.limits["memory_mb"] * _MB)
        value = b"%d" % limit
        for base, files in self.memory_files.items():
            path = b"%s/slot-%d/" % (base.encode(), run.uid)
            for file in sorted(files, reverse=raising):  # limit_in_bytes, then memsw
                try:
                    fd = os.open(path + file, os.O_WRONLY)
                    try:
                        os.write(fd, value)
                    finally:
                        os.close(fd)
                except OSError:
                    self.slot_memory.pop(run.uid, None)
                    return
        self.slot_memory[run.uid] = limit

    def _out_of_memory(self, run: _Run) -> bool:
        """Whether the kernel killed a process of the execution for its cgroup's memory."""
        kills = 0
        for base in self.cgroups:
            for events in (b"memory.oom_control", b"memory.events"):  # v1, v2
                with contextlib.suppress(OSError):
                    fd = os.open(b"%s/slot-%d/%s" % (base, run.uid, events), os.O_RDONLY)
                    try:
                        found = os.read(fd, 4096)
                    finally:
                        os.close(fd)
                    at = found.find(b"\noom_kill ")
                    if at >= 0:
                        kills += int(found[at + 10 :].split(b"\n", 1)[0])
        before, self.slots[run.uid] = self.slots.get(run.uid, 0), kills
        return kills > before

    def start_forker(self) -> None:
        """Fork the process that forks every execution's process (see `Forker`)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        exits_r, exits_w = os.pipe2(os.O_CLOEXEC)
        with open("/proc/self/statm", "rb") as f:  # what every child has resident at first
            self.baseline = int(f.read().split()[1]) * self.page
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                os.close(exits_r)
                Forker(self, theirs, exits_w).serve()
            finally:
                os._exit(70)
        theirs.close()
        os.close(exits_w)
        self.forker, self.forker_pid, self.exits = ours, pid, exits_r
        self._watch(exits_r, self._on_exits)

    def _on_exits(self) -> None:
        """Records from the forker: an execution's process has ended (and was reaped)."""
        data = os.read(self.exits, 4096 - 4096 % _EXIT.size)
        if not data:
            raise SystemExit("the sandbox's forker died")
        for pid, status, cpu_s, killed, alone, max_rss in _EXIT.iter_unpack(data):
            run = self.by_pid.pop(pid, None)
            if run is not None:
                run.left_nothing = bool(alone)
                run.max_rss = max_rss * 1024
                self._on_exit(run, status, cpu_s, bool(killed))

    def _watch(self, fd: int, handler: Callable[[], None]) -> None:
        self.epoll.register(fd, select.EPOLLIN)
        self.handlers[fd] = handler

    def _unwatch(self, fd: int) -> None:
        if self.handlers.pop(fd, None) is not None:
            self.epoll.unregister(fd)

    def serve(self) -> None:
        """Until tracegen hangs up and every execution is over and cleaned up."""
        self.sock.send(b"ready")
        poll, handlers = self.epoll.poll, self.handlers
        while self.runs or not self.closing:
            wake = min((t for t in (self.deadline, self.next_watch) if t is not None), default=None)
            timeout = -1.0 if wake is None else max(wake - time.monotonic(), 0)
            for fd, _ in poll(timeout):
                handler = handlers.get(fd)
                if handler is not None:
                    handler()
            if self.next_watch is not None and time.monotonic() >= self.next_watch:
                self._watch_runs()
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.deadline = None
                if self.prober is not None:
                    os.kill(self.prober["pid"], signal.SIGKILL)
        for judge in list(self.judges.values()):
            self._drop_judge(judge)
        # Hung up on, the forker exits; reaped, its executions' CPU time is counted in ours
        # (and so in tracegen's children's), as when they were our own children.
        self.forker.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.forker_pid, 0)

    def _on_wake(self) -> None:
        """A SIGCHLD: a child ended (or stopped)."""
        with contextlib.suppress(OSError):
            os.read(self.wake_r, 4096)
        self._reap()

    def _reap(self) -> None:
        """Handle every child that has ended, without reaping it yet."""
        if self.prober is not None:
            # Stopped (nothing it empties can signal it, but a stopped helper would hold
            # every cleanup until its deadline): replace it now.
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
            pid = info.si_pid
            if pid in self.judges:
                self._on_judge_exit(self.judges[pid])
            elif self.prober is not None and pid == self.prober["pid"]:
                self._on_prober_exit()
            else:
                os.waitpid(pid, 0)

    def _on_request(self) -> None:
        """``run ID UID MODE`` with the execution's pipes, or ``kill ID``."""
        try:
            data, ancillary, _, _ = self.sock.recvmsg(256, self.ancillary)
        except OSError:
            data, ancillary = b"", []
        fds = _received_fds(ancillary)
        words = data.split()
        if not words:
            for fd in fds:
                os.close(fd)
            self._close()
        elif words[0] == b"kill":
            run = self.runs.get(int(words[1]))
            if run is not None:
                self._kill(run)
        else:
            run_id, uid, tests = int(words[1]), int(words[2]), words[3] == b"tests"
            cpu = float(words[4]) if len(words) > 5 else float(self.limits["cpu_s"])
            memory = int(words[5]) if len(words) > 5 else self.limits["memory_mb"]
            self._start(run_id, uid, tests, fds, cpu, memory * _MB)

    def _on_mounts(self) -> None:
        """An execution's tmpfs, sent by it once mounted (`_own_namespaces`)."""
        assert self.mounts is not None
        try:
            workdir, ancillary, _, _ = self.mounts.recvmsg(1024, self.ancillary)
        except OSError:
            return
        fds = _received_fds(ancillary)
        for run in self.runs.values():
            if run.workdir.encode() == workdir and not run.own_files:
                run.own_files, fds = fds, []
                break
        for fd in fds:  # an execution already over
            os.close(fd)

    def _close(self) -> None:
        self.closing = True
        self._unwatch(self.sock.fileno())
        for run in self.runs.values():
            self._kill(run)

    def _kill(self, run: _Run) -> None:
        """Kill what is left of ``run``: its process group and the judge serving it."""
        if run.status is None:
            run.killed = True
            self._kill_group(run.pid)
        if run.judge is not None and run.judge_state == "busy":
            self._on_judge_exit(run.judge)

    # ---------------------------------------------------------------- the watch

    def _watch_runs(self) -> None:
        """Add up what each running execution's processes have used: the CPU of all of
        them, running or ended (an ended one is counted in the parent that reaped it), and,
        where no cgroup counts it, the memory they hold. One over its limit is killed."""
        self.next_watch = None
        for run in list(self.runs.values()):
            if run.status is not None or run.over is not None or run.pid < 0:
                continue
            pids = _descendants(run.pid)
            cpu = sum(map(self._cpu_s, pids))
            run.seen_cpu = max(run.seen_cpu, cpu)
            over = None
            if cpu > run.cpu_limit:
                over = "cpu"
            elif not self.memory_cgroup and self._held(run, pids) > run.memory_limit:
                over = "memory"
            if over is not None:
                run.over = over
                # Its processes, not its judge: the judge sees its candidate gone.
                self._kill_group(run.pid)
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            else:
                self.next_watch = time.monotonic() + WATCH_S

    def _cpu_s(self, pid: int) -> float:
        """CPU seconds of ``pid`` and of the children it reaped (0 if it is gone)."""
        try:
            with open(b"/proc/%d/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return sum(int(x) for x in fields[11:15]) / self.ticks

    def _held(self, run: _Run, pids: list[int]) -> int:
        """Bytes the execution holds: the files in its own tmpfs, and its processes' memory,
        each one's share of the pages it shares with others (the warm parent's, a forked
        sibling's) once the resident total, which counts them whole, is over the limit."""
        held = 0
        if self.own_mounts:
            for fd in run.own_files:
                with contextlib.suppress(OSError):
                    st = os.fstatvfs(fd)
                    held += (st.f_blocks - st.f_bfree) * st.f_frsize
        resident = [_resident(pid) for pid in pids]
        if held + sum(resident) <= run.memory_limit:
            return held + sum(resident)
        for pid, whole in zip(pids, resident, strict=True):
            share = _proportional(pid)
            held += whole if share is None else share
        return held

    # ---------------------------------------------------------------- starting children

    def _start(
        self, run_id: int, uid: int, tests: bool, fds: list[int], cpu_s: float, memory: int
    ) -> None:
        # A name no execution can guess: one made in advance must not stop this one.
        while True:
            token = os.urandom(8)
            run = _Run(run_id, uid, self.run_dir(run_id, token))
            try:
                os.mkdir(run.workdir, 0o700)
                break
            except FileExistsError:
                continue
        run.token = token
        run.cpu_limit, run.memory_limit = cpu_s, memory
        self._make_cgroups(run)
        if self.memory_cgroup:
            self._set_memory(run)
        if self.drop:
            os.chown(run.workdir, uid, uid)
        if tests:
            # fds: candidate's stdin, stdout, stderr; judge's tests, report.
            calls_r, calls_w = os.pipe2(os.O_CLOEXEC)
            answers_r, answers_w = os.pipe2(os.O_CLOEXEC)
            child_fds = [fds[0], fds[1], fds[2], answers_w, calls_r]
            judge_fds = [fds[3], fds[4], calls_w, answers_r]
            run.judge = self._take_judge()
        else:
            child_fds, judge_fds = fds, []
        run.pid = self._fork(run_id, uid, tests, token, child_fds)
        for fd in child_fds:
            os.close(fd)
        self.runs[run_id] = run
        self.by_pid[run.pid] = run
        if self.next_watch is None:
            self.next_watch = time.monotonic() + WATCH_S
        if run.judge is not None:
            run.judge_state = "busy"
            run.judge.run = run
            try:
                run.judge.sock.sendmsg(
                    [b"%d" % run_id],
                    [_passed_fds(judge_fds)],
                )
            except OSError:
                self._on_judge_exit(run.judge)
            for fd in judge_fds:
                os.close(fd)

    def _fork(self, run_id: int, uid: int, tests: bool, token: bytes, fds: list[int]) -> int:
        """The pid of the execution's process, forked by the forker."""
        try:
            self.forker.sendmsg(
                [_FORK.pack(b"f", run_id, uid, tests, token)],
                [_passed_fds(fds)],
            )
            reply = self.forker.recv(_FD.size)
        except OSError:
            reply = b""
        if len(reply) != _FD.size:
            raise SystemExit("the sandbox's forker died")
        pid: int = _FD.unpack(reply)[0]
        return pid

    def _child(self, fds: list[int], uid: int, workdir: str, *, judge: bool) -> str:
        """Make this fresh child the execution's (or judge's) process; its working directory."""
        # Everything a child runs before the generated code is a system call or close to one:
        # each page of the zygote it touches costs a copy (measured: ~5 us per page here).
        os.setsid()
        if min(fds) < len(fds):  # a target would be overwritten before it is read
            fds = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for low, high in self.gaps[len(fds)]:
            os.closerange(low, high)
        if not judge:
            workdir = self._own_namespaces(uid, workdir)
        for name, limit in self.rlimits[judge]:
            resource.setrlimit(name, limit)
        os.chdir(workdir)
        if self.drop:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if self.confinement.paths:
            own = os.open(workdir, os.O_PATH | os.O_CLOEXEC)
            proc = os.open("/proc/self", os.O_PATH | os.O_CLOEXEC)
            # A /dev/shm of its own (POSIX semaphores, shared memory) it may write in too.
            shm = (
                os.open("/dev/shm", os.O_PATH | os.O_CLOEXEC)
                if self.own_mounts and not judge
                else -1
            )
            self.confinement.apply(own, proc, shm)
            os.close(own)
            os.close(proc)
            if shm >= 0:
                os.close(shm)
        else:
            self.confinement.apply()
        for fd in self.confined_fds:
            os.close(fd)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if judge:
            _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        if os.getppid() != self.parent_pid:  # it died before PR_SET_PDEATHSIG took
            os._exit(70)
        signal.set_wakeup_fd(-1)
        _signal.signal(_SIGCHLD, _signal.SIG_DFL)  # SIGXFSZ and SIGINT: set in `main`
        path = workdir.encode()
        for key in (b"HOME", b"TMPDIR", b"PWD"):
            self.putenv(key, path)
            self.environ[key] = path
        return workdir

    def _own_namespaces(self, uid: int, workdir: str) -> str:
        """Give the execution (forked, not yet confined, its uid not dropped) what it shares
        with no other: its cgroups, user namespace (without root: its own process count),
        IPC namespace, and a mount namespace where its directory (under bubblewrap, ``/tmp``)
        and ``/dev/shm`` are tmpfs of its own, of bounded size. Its working directory."""
        if self.cgroups:
            for base in self.cgroups:
                fd = os.open(b"%s/slot-%d/cgroup.procs" % (base, uid), os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
        unshare = self.unshare_ipc[0]
        if self.own_user:
            # Only a dumpable process may write its own maps (see `main`).
            _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
            if unshare(_CLONE_NEWUSER) != 0:
                raise OSError("unshare(CLONE_NEWUSER)")
            _write_sysctls(self.user_maps)
            _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        if self.unshare_flags and unshare(self.unshare_flags) != 0:
            raise OSError("unshare(CLONE_NEWIPC|CLONE_NEWNS)")
        if self.ipc:
            _write_sysctls(self.ipc)
        if self.own_mounts:
            name = workdir.encode()
            if self.home_on_tmp:
                workdir = "/tmp"
            options = self.tmpfs_options % (uid, uid) if self.drop else self.tmpfs_options
            flags = _MS_NOSUID | _MS_NODEV
            targets = (workdir.encode(), b"/dev/shm")
            for target in targets:
                if _libc.mount(b"tmpfs", target, b"tmpfs", flags, options) != 0:
                    raise OSError(f"mount(tmpfs) on {target!r}")
            if self.mounts_out is not None:
                flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
                mounted = [os.open(target, flags) for target in targets]
                self.mounts_out.sendmsg([name], [_passed_fds(mounted)])
                for fd in mounted:
                    os.close(fd)
        return workdir

    def _kill_group(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)

    # ---------------------------------------------------------------- judges

    def _take_judge(self) -> _Judge:
        if self.idle:
            return self.idle.pop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        workdir = os.path.join(self.workbase, f"judge-{os.urandom(8).hex()}")
        os.mkdir(workdir, 0o700)
        if self.drop:
            os.chown(workdir, self.judge_uid, self.judge_uid)
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                self._child([self.devnull, self.devnull, self.devnull, theirs.fileno()],
                            self.judge_uid, workdir, judge=True)  # fmt: skip
                _serve_judge(socket.socket(fileno=3))
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        ours.setblocking(False)
        judge = _Judge(pid, ours, workdir)
        self.judges[pid] = judge
        self._watch(ours.fileno(), lambda: self._on_judge_message(judge))
        return judge

    def _on_judge_message(self, judge: _Judge) -> None:
        try:
            data = judge.sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_judge_exit(judge)
            return
        run, judge.run = judge.run, None
        judge.served += 1
        if judge.served >= JUDGE_RUNS:
            self._drop_judge(judge)
        else:
            self.idle.append(judge)
        if run is not None:
            self._judged(run, "done")

    def _on_judge_exit(self, judge: _Judge) -> None:
        run, judge.run = judge.run, None
        self._drop_judge(judge)
        if run is not None:
            self._judged(run, "died")

    def _judged(self, run: _Run, state: str) -> None:
        """The judge of ``run`` is done (or dead): end the candidate, then clean up."""
        if run.judge_state != "busy":
            return
        run.judge_state = state
        if run.status is None:
            # The forker kills what is left; its exit record says whether it was still running.
            with contextlib.suppress(OSError):
                self.forker.send(_END.pack(b"e", run.pid))
        else:
            self._cleanup(run)

    def _drop_judge(self, judge: _Judge) -> None:
        """Kill ``judge``, reap it and forget it (its execution is the caller's business)."""
        if self.judges.pop(judge.pid, None) is None:
            return
        if judge in self.idle:
            self.idle.remove(judge)
        with contextlib.suppress(OSError):
            os.kill(judge.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(judge.pid, 0)
        self._unwatch(judge.sock.fileno())
        judge.sock.close()
        _remove_tree(judge.workdir)

    # ---------------------------------------------------------------- ending executions

    def _on_exit(self, run: _Run, status: int, cpu_s: float, killed: bool) -> None:
        run.status, run.cpu_s = status, max(cpu_s, run.seen_cpu)
        run.killed = run.killed or killed
        if run.judge is None or run.judge_state != "busy":
            self._cleanup(run)

    def _cleanup(self, run: _Run) -> None:
        """The execution is over: kill what is left of its uid (or group), then report it."""
        self._kill_group(run.pid)
        if self.drop and not run.left_nothing:
            self.emptying[run.uid] = run.id
            self._ask_prober(run.uid)
        else:
            self._finish(run.id)

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
                _prober(theirs, self.prober_uid)
            finally:
                os._exit(0)
        theirs.close()
        ours.setblocking(False)
        self.prober = {"pid": pid, "sock": ours}
        self._watch(ours.fileno(), self._on_prober_answer)

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
        self._unwatch(prober["sock"].fileno())
        prober["sock"].close()
        self.deadline = None
        for uid in self.emptying:
            self._ask_prober(uid)

    def _forget_files(self, run: _Run) -> None:
        """Evict from the host's page cache what the execution brought into it.

        A page is charged to the memory cgroup of the process that first read it: emptying
        the slot's cgroup (``memory.force_empty`` in v1, ``memory.reclaim`` in v2) drops
        every page of a file that this execution, and no one before it, read. A later
        execution that times a read of it finds it as it was before (the page-cache timing
        channel: ``benchmarks/page_cache_channel.py``); what was cached already stays.
        Whether the slot holds anything is read from its page counter (``memory.usage_in_bytes``,
        ``memory.current``), which is exact; never from ``memory.stat``, whose counts the
        kernel flushes only in batches: a few pages read just before the execution ended
        may not be in it yet, and skipping them left a channel open.
        """
        for base in self.cgroups:
            slot = b"%s/slot-%d/" % (base, run.uid)
            for usage, empty in (
                (b"memory.usage_in_bytes", b"memory.force_empty"),
                (b"memory.current", b"memory.reclaim"),
            ):
                try:
                    fd = os.open(slot + usage, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    held = int(os.read(fd, 64))
                finally:
                    os.close(fd)
                if held:
                    _empty(slot + empty, b"0" if empty == b"memory.force_empty" else b"%d" % held)
                break

    def _finish(self, run_id: int) -> None:
        run = self.runs.pop(run_id)
        for fd in run.own_files:  # they keep its tmpfs (and its files) alive
            os.close(fd)
        out_of_memory = self._out_of_memory(run) or run.over == "memory"
        if not self.memory_cgroup and run.max_rss > run.memory_limit + self.baseline:
            # One process held more between two looks of the watch (its resident pages,
            # those it shares with this warm parent too, hence the baseline).
            out_of_memory = True
        try:
            os.rmdir(run.workdir)
        except OSError:
            _remove_tree(run.workdir)
        self._forget_files(run)  # its files gone: nothing charged to it is kept but cache
        status = run.status
        assert status is not None
        exited, code = os.WIFEXITED(status), os.WEXITSTATUS(status)
        done = "done %d %s %s %.6f %d %s %d" % (  # noqa: UP031 (plain C formatting: see the class)
            run_id,
            code if exited else "-",
            "-" if exited else os.WTERMSIG(status),
            run.cpu_s,
            run.killed,
            run.judge_state or "-",
            out_of_memory,
        )
        with contextlib.suppress(OSError):
            self.sock.send(done.encode())


class Forker:
    """The process that forks every execution's process, in a loop that writes few pages.

    After each fork, every page of the forking process that it writes while the child
    lives is copied, and the child copies every page it writes: the zygote's bookkeeping
    (judges, the prober, reports) would cost each execution a hundred copies more, so it
    happens in the zygote, which forks only judges and the prober. The forker is the
    children's parent and subreaper: it reaps them, and their orphans, and sends the
    zygote a record of each end. Forked from the warm zygote, it dies with it.
    """

    def __init__(self, zygote: Zygote, requests: socket.socket, exits: int) -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != zygote.parent_pid:
            os._exit(70)
        self.zygote, self.requests, self.exits = zygote, requests, exits
        zygote.parent_pid = os.getpid()
        for low, high in _gaps({0, 1, 2, requests.fileno(), exits, zygote.devnull, *zygote.keep}):
            os.closerange(low, high)
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        self.live: dict[int, bool] = {}  # pid -> killed by tracegen
        self.ancillary = socket.CMSG_SPACE(8 * _FD.size)

    def serve(self) -> None:
        poll = select.poll()
        poll.register(self.requests.fileno(), select.POLLIN)
        poll.register(self.wake_r, select.POLLIN)
        requests = self.requests.fileno()
        while True:
            for fd, _ in poll.poll():
                if fd == requests:
                    self._on_request()
                else:
                    self._reap()

    def _on_request(self) -> None:
        data, ancillary, _, _ = self.requests.recvmsg(64, self.ancillary)
        fds = _received_fds(ancillary)
        if not data:
            os._exit(0)
        if data[:1] == b"e":
            self._end(_END.unpack(data)[1])
            return
        _, run_id, uid, tests, token = _FORK.unpack(data)
        zygote = self.zygote
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                workdir = zygote._child(fds, uid, zygote.run_dir(run_id, token), judge=False)
                if tests:
                    code = _harness.serve_candidate(where=workdir)
                else:
                    code = _harness.script(where=workdir)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        self.live[pid] = False
        self.requests.send(_FD.pack(pid))

    def _end(self, pid: int) -> None:
        """The judge is done: kill what is left of the execution, noting if it still ran."""
        if pid in self.live:
            with contextlib.suppress(ChildProcessError):
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                    self.live[pid] = True
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)

    def _reap(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self.wake_r, 4096)
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            killed = self.live.pop(pid, None)
            if killed is not None:  # else an orphan of an execution
                cpu_s = usage.ru_utime + usage.ru_stime
                if not self.zygote.drop:
                    self._kill_strays()
                alone = self.zygote.drop and self._alone()  # only uids are ever probed
                rss = usage.ru_maxrss
                os.write(self.exits, _EXIT.pack(pid, status, cpu_s, killed, alone, rss))

    def _children(self) -> list[int] | None:
        """The forker's children (zombies included); ``None`` where the kernel does not say."""
        try:
            fd = os.open("/proc/thread-self/children", os.O_RDONLY)
        except OSError:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return [int(pid) for pid in b"".join(chunks).split()]

    def _kill_strays(self) -> None:
        """Without uids of their own (tracegen not run as root), kill every process left by an
        execution: every child of the forker that is not a running execution's process.

        A process whose parent has ended is reparented to the forker (the executions'
        subreaper), a daemon that left its execution's session included: it is killed when
        an execution ends, before that end is reported (it would hold the execution's
        pipes open, and outlive tracegen), whichever execution it came from. Its own
        children are reparented to the forker in turn, and killed in the next round; a
        process with ``SIGKILL`` pending can no longer fork, so the rounds end.
        """
        for _ in range(10_000):
            children = self._children()
            strays = [pid for pid in children or () if pid not in self.live]
            if not strays:
                return
            for pid in strays:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            for pid in strays:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)

    def _alone(self) -> bool:
        """Whether every child of the forker is a running execution's process.

        Then nothing is left of the executions that ended: a process they leave behind is
        reparented to the forker (their subreaper), or to a subreaper of theirs that is
        itself left behind, before the execution's process can be reaped; and the zombie
        of a process that exits stays a child until the forker reaps it. If this cannot
        be read (a kernel without ``/proc/PID/task/TID/children``), nothing is assumed.
        """
        children = self._children()
        live = self.live
        return children is not None and all(pid in live for pid in children)


def _serve_judge(sock: socket.socket) -> None:
    """A judge's life: one execution per message from the zygote, until it hangs up."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except OSError:
            return
        if not data:
            return
        try:
            if len(fds) == 4:
                _harness.judge_one(fds)
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(data)


def main(config: dict[str, Any]) -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # for the children: a write fails instead
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)  # glibc; elsewhere a call that does nothing
    confine = config.get("confine") or {}
    if confine.get("namespaces"):
        user = confine["namespaces"] == "user"
        _confine.enter_namespaces(
            user=user, tmpfs=config["workbase"], read_only=confine.get("read_only", ())
        )
    # Processes of the same uid (a candidate when not running as root) cannot debug us; only
    # now: a process that is not dumpable cannot write its own uid_map.
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    for name in PRELOAD:
        __import__(name)
    _harness.offer_semaphores()
    if config["drop"]:
        os.chmod(config["workbase"], 0o711)
    # --sandbox-packages: after the standard library, so none of its modules is shadowed.
    sys.path.extend(config.get("packages") or [])
    sock = socket.socket(fileno=config["fd"])
    zygote = Zygote(sock, config)
    warm = os.path.join(config["workbase"], f"warm-{os.urandom(8).hex()}")
    os.mkdir(warm, 0o700)
    _harness.warm_up(where=warm)
    os.rmdir(warm)
    gc.collect()
    gc.freeze()  # children inherit these objects without the collector touching their pages
    zygote.start_forker()
    zygote.serve()
