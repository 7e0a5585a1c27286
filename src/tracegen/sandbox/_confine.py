"""Kernel isolation without an external binary: namespaces, Landlock, seccomp, capabilities.

Standard library only: the sandbox's zygote runs it under ``python -I -S`` (see
`tracegen.sandbox._zygote`), and tracegen imports it to ask the kernel what it offers.

- `enter_namespaces`: a private network namespace (no interface but a downed loopback: no
  network at all), IPC namespace and mount namespace (where the executions' directories
  get a tmpfs of their own); for a user without root, inside a new user namespace that
  maps only their own uid and gid.
- `Confinement`: built once in the zygote, applied by each freshly forked child, which then
  makes only system calls with structures prepared in advance (a forked child pays for
  every page of the parent it touches). It drops the capabilities a user namespace gave,
  sets ``no_new_privs``, then Landlock: the child and its descendants may read and execute
  only beneath the read-only paths and write only beneath their own directory; no TCP bind
  or connect; no signal to, nor abstract unix socket of, a process outside their own
  domain (so a program cannot kill or debug the judge, the zygote or tracegen). Last a
  seccomp filter (`_seccomp_program`): ``socket(AF_UNIX, ...)``, ``sendmsg``,
  ``io_uring_setup``, the keyrings, ``prlimit64`` of another process and new namespaces
  fail, so sockets of the host's services (D-Bus, Docker...) cannot be reached by path,
  which Landlock before ABI 9 does not govern, nothing is left for a later execution in
  the uid's keyring, no limit of another process changes, and the kernel code behind user
  namespaces is out of reach.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Iterable
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
READ_ONLY = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FS_V1 = (1 << 13) - 1  # execute ... make_sym
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_TCP = 0b11  # ABI 4: bind, connect
_SCOPES = 0b11  # ABI 6: abstract unix sockets, signals

_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_REMOUNT = 0x20
_MS_NOATIME = 0x400
_MS_NODIRATIME = 0x800
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_RELATIME = 1 << 21
_MS_PRIVATE = 1 << 18
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_AF_UNIX = 1
_CLONE_NEWTIME = 0x00000080  # unshare's; in clone's flags these bits are the exit signal
_NAMESPACES = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_SECCOMP_ARCH = {
    # machine: (AUDIT_ARCH, the x32 bit to refuse or 0, system call numbers)
    "x86_64": (
        0xC000003E,
        0x40000000,
        {"socket": 41, "socketpair": 53, "clone": 56, "unshare": 272, "setns": 308,
         "add_key": 248, "request_key": 249, "keyctl": 250, "prlimit64": 302,
         "io_uring_setup": 425, "clone3": 435, "fadvise64": 221, "readahead": 187,
         "mincore": 27, "madvise": 28, "process_madvise": 440, "cachestat": 451,
         "preadv2": 327, "pwritev2": 328, "flock": 73, "fcntl": 72, "inotify_init": 253,
         "inotify_init1": 294, "fanotify_init": 300, "sendmsg": 46, "sendmmsg": 307},
    ),
    "aarch64": (
        0xC00000B7,
        0,
        {"socket": 198, "socketpair": 199, "clone": 220, "unshare": 97, "setns": 268,
         "add_key": 217, "request_key": 218, "keyctl": 219, "prlimit64": 261,
         "io_uring_setup": 425, "clone3": 435, "fadvise64": 223, "readahead": 213,
         "mincore": 232, "madvise": 233, "process_madvise": 440, "cachestat": 451,
         "preadv2": 286, "pwritev2": 287, "flock": 32, "fcntl": 25,
         "inotify_init1": 26, "fanotify_init": 262, "sendmsg": 211, "sendmmsg": 269},
    ),
}  # fmt: skip

_MACHINE = os.uname().machine
_LINUX = sys.platform == "linux"
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class ConfineError(OSError):
    """A confinement step the kernel refused."""


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise ConfineError(err, f"{what}: {os.strerror(err)}")
    return result


def enter_namespaces(
    *,
    user: bool,
    tmpfs: str | None = None,
    tmpfs_mb: int = 1024,
    read_only: Iterable[str] = (),
) -> None:
    """Move this (single-threaded) process into new network, IPC and mount namespaces.

    With ``user`` (needed without root) they live in a new user namespace where this
    process keeps its uid and gid and holds capabilities only over those namespaces; its
    children drop them (`Confinement`). ``tmpfs``: a directory to cover, in the new mount
    namespace only, with a tmpfs of ``tmpfs_mb`` (best effort: left as it is if refused).
    ``read_only``: paths mounted again, there only, read-only and ``noatime`` (see
    `remount_read_only`).
    """
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS | (CLONE_NEWUSER if user else 0)
    _check(_libc.unshare(flags), "unshare")
    if user:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
    # Nothing mounted here propagates back to the host's mount namespace.
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount(private)")
    if tmpfs is not None:
        options = f"size={tmpfs_mb}m,mode=0711".encode()
        _libc.mount(b"tracegen", tmpfs.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options)
    remount_read_only(read_only)


def remount_read_only(paths: Iterable[str]) -> list[str]:
    """Bind each of ``paths`` on itself read-only (and ``noatime`` where the kernel lets this
    mount namespace change how access times are kept); the paths it could not.

    A read under a read-only mount writes no access time to the host's disk: nothing an
    execution reads leaves a mark another could find with ``stat``. Mounts beneath a path
    keep their own flags.
    """
    failed = []
    for path in paths:
        try:
            flags = os.statvfs(path).f_flag
        except OSError:
            continue
        keep = flags & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC)  # as MS_* bits: locked
        atime = flags & (os.ST_NOATIME | os.ST_NODIRATIME)
        atime |= _MS_RELATIME if flags & os.ST_RELATIME else 0
        target = path.encode()
        if _libc.mount(target, target, None, _MS_BIND | _MS_REC, None) != 0:
            failed.append(path)
            continue
        remount = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | keep
        tries = (remount | _MS_NOATIME | _MS_NODIRATIME, remount | atime)
        if not any(_libc.mount(None, target, None, flags, None) == 0 for flags in tries):
            failed.append(path)
    return failed


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 when it offers none."""
    if not _LINUX or _MACHINE not in _SECCOMP_ARCH:
        return 0  # the system call numbers above are those of x86_64 and aarch64
    version = _libc.syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


def seccomp_supported() -> bool:
    return _LINUX and _MACHINE in _SECCOMP_ARCH


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _seccomp_program() -> bytes:
    """The filter: kernel surface generated code has no need for fails with ``EPERM``.

    ``socket(AF_UNIX, ...)`` (the host's services by path), ``socketpair`` but of
    ``AF_UNIX``, ``sendmsg`` and ``sendmmsg`` (the only way to pass descriptors over a
    socket, ``SCM_RIGHTS``, and with them the kernel's garbage collector of unix sockets in
    flight), ``io_uring_setup``, the kernel's keyrings (``add_key``, ``request_key``,
    ``keyctl``: the user keyring is the uid's, shared by its executions and kept after
    them), the limits of another process (``prlimit64`` with a pid: of the same uid, those
    of tracegen, its zygote or judge), new namespaces (``unshare`` or ``clone`` with a
    ``CLONE_NEW*`` flag, ``setns``) and foreign-ABI calls. ``clone3`` fails with ``ENOSYS``:
    its flags lie in memory a filter cannot read, and the C library then falls back to
    ``clone``, whose flags it can (threads and forks pass no namespace flag). A pair of
    ``AF_UNIX`` sockets made by ``socketpair`` is connected to itself alone: it reaches
    nothing outside the execution's own processes (asyncio's event loop wakes itself
    through one).

    Then what would let an execution leave a mark in kernel state it shares with later or
    concurrent executions, or read one (`SHARED_STATE`): the host's page cache (evicting
    pages with ``fadvise``, ``MADV_PAGEOUT`` or ``MADV_COLD``, probing them with
    ``mincore``, ``cachestat`` or a read with ``RWF_NOWAIT``), file locks, watches on
    files (inotify, fanotify, dnotify), sockets other than TCP ones (a UDP or netlink
    port held is seen by a concurrent execution; Landlock refuses TCP's bind and connect).
    Advice and locks *succeed without effect* (``posix_fadvise``, ``readahead``, ``flock``,
    ``fcntl``'s ``F_SETLK``/``F_SETLKW``/``F_OFD_SETLK*``): a lock in an execution's own
    directory locks nothing any other process could take, and SQLite, ``shelve`` or
    ``fcntl.lockf`` on its own files keep working (two processes of one execution are not
    kept from each other by them). A read with ``RWF_NOWAIT`` fails as on a file that
    does not support it (``EOPNOTSUPP``), and the rest with ``EPERM``.
    """
    arch, x32, nr = _SECCOMP_ARCH[_MACHINE]
    ld_w_abs, jeq_k, jge_k, jset_k, ret_k = 0x20, 0x15, 0x35, 0x45, 0x06
    alu_and_k = 0x54
    allow, no_effect = 0x7FFF0000, 0x00050000
    deny, absent = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    unsupported = 0x00050000 | errno.EOPNOTSUPP

    def arg(index: int) -> int:
        """The offset of the low half of argument ``index`` in ``struct seccomp_data``."""
        return 16 + 8 * index

    def on_call(number: int, index: int, cases: list[tuple[int, int, int]]) -> list[bytes]:
        """``number``'s calls end with ``action`` for the first ``(test, k, action)`` its
        argument ``index`` passes (``test`` with ``k``), else are allowed."""
        body = [_bpf(ld_w_abs, arg(index))]
        for test, k, action in cases:
            body += [_bpf(test, k, jt=0, jf=1), _bpf(ret_k, action)]
        body.append(_bpf(ret_k, allow))
        return [_bpf(jeq_k, number, jt=0, jf=len(body)), *body]

    program = [
        _bpf(ld_w_abs, 4),  # arch
        _bpf(jeq_k, arch, jt=1),
        _bpf(ret_k, deny),
        _bpf(ld_w_abs, 0),  # syscall number
        _bpf(jge_k, x32 or 0xFFFFFFFF, jt=0, jf=1),
        _bpf(ret_k, deny),
    ]
    calls = [
        ("io_uring_setup", deny),
        ("sendmsg", deny),
        ("sendmmsg", deny),
        ("setns", deny),
        ("add_key", deny),
        ("request_key", deny),
        ("keyctl", deny),
        ("clone3", absent),
        *((name, action) for name, action in SHARED_STATE if name in nr),
    ]
    for name, action in calls:
        program += [_bpf(jeq_k, nr[name], jt=0, jf=1), _bpf(ret_k, action)]
    # socket: TCP over IPv4 or IPv6 only (family, then the type without its flags).
    socket_tail = [
        _bpf(ld_w_abs, arg(1)),
        _bpf(alu_and_k, 0xF),
        _bpf(jeq_k, _SOCK_STREAM, jt=0, jf=1),
        _bpf(ret_k, allow),
        _bpf(ret_k, deny),
    ]
    program += [
        _bpf(jeq_k, nr["socket"], jt=0, jf=4 + len(socket_tail)),
        _bpf(ld_w_abs, arg(0)),
        _bpf(jeq_k, _AF_INET, jt=2, jf=0),
        _bpf(jeq_k, _AF_INET6, jt=1, jf=0),
        _bpf(ret_k, deny),
        *socket_tail,
    ]
    program += on_call(nr["socketpair"], 0, [(jeq_k, _AF_UNIX, allow), (jge_k, 0, deny)])
    program += on_call(nr["unshare"], 0, [(jset_k, _NAMESPACES | _CLONE_NEWTIME, deny)])
    program += on_call(nr["clone"], 0, [(jset_k, _NAMESPACES, deny)])
    # pid 0 is the caller: any other is refused.
    program += on_call(nr["prlimit64"], 0, [(jeq_k, 0, allow), (jge_k, 0, deny)])
    program += on_call(nr["preadv2"], 5, [(jset_k, _RWF_NOWAIT, unsupported)])
    program += on_call(nr["pwritev2"], 5, [(jset_k, _RWF_NOWAIT, unsupported)])
    program += on_call(nr["madvise"], 2, [(jeq_k, a, no_effect) for a in _MADV_EVICT])
    program += on_call(
        nr["fcntl"],
        1,
        [(jeq_k, c, no_effect) for c in _F_SETLOCK] + [(jeq_k, c, deny) for c in _F_WATCH],
    )
    program.append(_bpf(ret_k, allow))
    return b"".join(program)


SHARED_STATE = (
    ("fadvise64", 0x00050000),  # succeeds, does nothing
    ("readahead", 0x00050000),
    ("flock", 0x00050000),
    ("mincore", 0x00050000 | errno.EPERM),
    ("cachestat", 0x00050000 | errno.EPERM),
    ("process_madvise", 0x00050000 | errno.EPERM),
    ("inotify_init", 0x00050000 | errno.EPERM),
    ("inotify_init1", 0x00050000 | errno.EPERM),
    ("fanotify_init", 0x00050000 | errno.EPERM),
)
"""System calls on the kernel state executions share, and what the filter makes of them:
success without effect (advice, locks) or ``EPERM`` (see `_seccomp_program`)."""
_AF_INET, _AF_INET6, _SOCK_STREAM = 2, 10, 1
_RWF_NOWAIT = 0x8
_MADV_EVICT = (20, 21)  # MADV_COLD, MADV_PAGEOUT
_F_SETLOCK = (6, 7, 37, 38)  # F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW
_F_WATCH = (1024, 1026)  # F_SETLEASE, F_NOTIFY


class Confinement:
    """The built-in isolation of one kind of child, prepared before any fork.

    ``landlock``: the ABI to use (0: none); ``read_only``: ``O_PATH`` fds of directories to
    read and execute beneath; ``files``: ``(O_PATH fd, FS_* rights)`` of single files;
    ``seccomp``: install the socket filter; ``drop_caps``: empty the capability sets (under
    a user namespace); ``scope_only``: Landlock without rules on files (under bubblewrap,
    which mounts what may be read): only no TCP and, from ABI 6, no signal to and no
    abstract socket of any process outside the child's own domain. With nothing asked
    for, `apply` only sets ``no_new_privs``.
    """

    def __init__(
        self,
        *,
        landlock: int = 0,
        read_only: Iterable[int] = (),
        files: Iterable[tuple[int, int]] = (),
        seccomp: bool = False,
        drop_caps: bool = False,
        scope_only: bool = False,
    ) -> None:
        if scope_only and landlock < 4:
            landlock = 0  # nothing to scope before ABI 4 (TCP) and 6 (signals)
        self.landlock = landlock
        self.paths = bool(landlock) and not scope_only
        """Whether `apply` takes the directory it may write in."""
        self.seccomp = seccomp
        self.drop_caps = drop_caps
        self._keep: list[Any] = []  # buffers the prepared pointers point into
        self._syscall = _libc.syscall
        self._prctl = _libc.prctl
        self._capset = _libc.capset
        self._caps = (ctypes.byref(_CapHeader(0x20080522, 0)), (_CapData * 2)())
        self._nnp = [ctypes.c_ulong(x) for x in (_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)]
        if landlock:
            fs = 0 if scope_only else self._handled_fs(landlock)
            if landlock >= 6:
                attr = struct.pack("=QQQ", fs, _NET_TCP, _SCOPES)
            elif landlock >= 4:
                attr = struct.pack("=QQ", fs, _NET_TCP)
            else:
                attr = struct.pack("=Q", fs)
            buffer = ctypes.create_string_buffer(attr, len(attr))
            self._create = (
                ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
                buffer,
                ctypes.c_size_t(len(attr)),
                ctypes.c_uint32(0),
            )
            rules = [_PathBeneath(READ_ONLY & fs, fd) for fd in read_only]
            rules += [_PathBeneath(access & _FILE_ONLY & fs, fd) for fd, access in files]
            self._own = _PathBeneath(fs, -1)
            self._proc = _PathBeneath(READ_ONLY & fs, -1)
            self._shm = _PathBeneath(fs, -1)
            self._rules = [ctypes.byref(rule) for rule in rules]
            self._owned = [
                (rule, ctypes.byref(rule)) for rule in (self._own, self._proc, self._shm)
            ]
            self._keep += [buffer, rules]
            self._add = ctypes.c_long(_SYS_LANDLOCK_ADD_RULE)
            self._restrict = ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF)
            self._beneath = ctypes.c_uint32(_LANDLOCK_RULE_PATH_BENEATH)
            self._zero = ctypes.c_uint32(0)
        if seccomp:
            program = _seccomp_program()
            filters = ctypes.create_string_buffer(program, len(program))
            fprog = _SockFprog(len(program) // 8, ctypes.addressof(filters))
            self._keep += [filters, fprog]
            zero = ctypes.c_ulong(0)
            self._seccomp = (
                ctypes.c_int(_PR_SET_SECCOMP),
                ctypes.c_ulong(_SECCOMP_MODE_FILTER),
                ctypes.byref(fprog),
                zero,
                zero,
            )

    @staticmethod
    def _handled_fs(abi: int) -> int:
        handled = _FS_V1
        if abi >= 2:
            handled |= _FS_REFER
        if abi >= 3:
            handled |= _FS_TRUNCATE
        if abi >= 5:
            handled |= _FS_IOCTL_DEV
        return handled

    def apply(self, own_dir_fd: int = -1, proc_fd: int = -1, shm_fd: int = -1) -> None:
        """Confine the calling (single-threaded) process and its future children.

        ``own_dir_fd`` and ``proc_fd`` (``O_PATH``) are the directory it may write in and
        its ``/proc/PID`` entry, ``shm_fd`` a ``/dev/shm`` of its own it may write in too;
        only system calls happen here. Raises `ConfineError`.
        """
        if self.drop_caps:
            _check(self._capset(*self._caps), "capset")
        _check(self._prctl(*self._nnp), "prctl(PR_SET_NO_NEW_PRIVS)")
        if self.landlock:
            ruleset = _check(self._syscall(*self._create), "landlock_create_ruleset")
            try:
                rules: list[Any] = list(self._rules)
                if self.paths:
                    fds = (own_dir_fd, proc_fd, shm_fd)
                    for (rule, _), fd in zip(self._owned, fds, strict=True):
                        rule.parent_fd = fd
                    rules = [*rules, *(ref for rule, ref in self._owned if rule.parent_fd >= 0)]
                for rule in rules:
                    _check(
                        self._syscall(self._add, ruleset, self._beneath, rule, self._zero),
                        "landlock_add_rule",
                    )
                _check(self._syscall(self._restrict, ruleset, self._zero), "landlock_restrict")
            finally:
                os.close(ruleset)
        if self.seccomp:
            _check(self._prctl(*self._seccomp), "seccomp")


# ------------------------------------------------------------------ what works here


def probe(*, user: bool) -> dict[str, object]:
    """Try each layer on this (throwaway) process; what worked and why the others did not."""
    import socket

    found: dict[str, object] = {"namespaces": None, "landlock": 0, "seccomp": False}
    problems: list[str] = []
    try:
        enter_namespaces(user=user)
        with socket.socket() as s:
            try:
                s.connect(("127.0.0.1", 9))
            except OSError as e:
                if e.errno not in (errno.ENETUNREACH, errno.EADDRNOTAVAIL):
                    raise ConfineError(e.errno, f"network still reachable: {e.strerror}") from None
        found["namespaces"] = "user" if user else "net"
    except OSError as e:
        problems.append(f"no {'user+' if user else ''}network namespace ({e})")
    abi = landlock_abi()
    if not abi:
        problems.append("no Landlock (Linux 5.13+ with Landlock enabled)")
    secure = seccomp_supported()
    try:
        Confinement(landlock=abi, seccomp=secure, drop_caps=user).apply()
    except OSError as e:
        problems.append(f"confinement refused ({e})")
        return {**found, "problems": problems}
    if abi:
        try:
            os.listdir("/")
            problems.append("Landlock did not confine the filesystem")
        except PermissionError:
            found["landlock"] = abi
    if secure:
        try:
            socket.socket(socket.AF_UNIX).close()
            problems.append("seccomp did not refuse unix sockets")
        except PermissionError:
            if _libc.unshare(CLONE_NEWUSER) == 0:
                problems.append("seccomp did not refuse new namespaces")
            else:
                found["seccomp"] = True
    else:
        problems.append(f"no seccomp filter for {_MACHINE}")
    return {**found, "problems": problems}
