"""Programs that reach for kernel state every execution shares (the host's page cache, file
locks, watches on files, ports) to leave a mark for a later or concurrent execution or to
read one; the ordinary programs that must keep working; and the host-side checks of what
such a program managed to change. Each program prints JSON."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from tracegen.schema import Problem, TestCase

FILES = sorted(Path("/usr/share/doc").glob("*/copyright"))[:24]
"""Files every execution may read and hardly anything else does: whether the host's page
cache holds each one is a bit of the attack's memory (one whole file, not a page: on some
machines one read caches a file whole)."""
CHANNEL = FILES[0] if len(FILES) == 24 else Path("/nonexistent")
NEEDS_CHANNEL = pytest.mark.skipif(
    not CHANNEL.exists(), reason="fewer than 24 files in /usr/share/doc/*/copyright"
)
PAGE = os.sysconf("SC_PAGE_SIZE")

PROBES = f"""
import ctypes, errno, fcntl, json, mmap, os, socket
libc = ctypes.CDLL(None, use_errno=True)
out = {{}}

def c(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "")
    return 0

def attempt(name, call):
    try:
        result = call()
        out[name] = "ok" if result in (None, 0, True) or type(result) is int else repr(result)
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))

fd = os.open({str(CHANNEL)!r}, os.O_RDONLY)
size = os.fstat(fd).st_size
mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ)
attempt("posix_fadvise(DONTNEED)", lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
attempt("readahead", lambda: c(libc.readahead(fd, ctypes.c_long(0), ctypes.c_size_t(size))))
attempt("preadv2(RWF_NOWAIT)", lambda: os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT))
attempt("pwritev2(RWF_NOWAIT)", lambda: os.pwritev(1, [b""], -1, os.RWF_NOWAIT))
attempt("madvise(MADV_PAGEOUT)", lambda: mapped.madvise(21))
attempt("madvise(MADV_COLD)", lambda: mapped.madvise(20))
anonymous = mmap.mmap(-1, mmap.PAGESIZE)
start = ctypes.addressof(ctypes.c_char.from_buffer(anonymous))
attempt("mincore", lambda: c(libc.mincore(ctypes.c_void_p(start), mmap.PAGESIZE,
                                          ctypes.create_string_buffer(1))))
attempt("cachestat", lambda: c(libc.syscall(451, fd, ctypes.create_string_buffer(16),
                                            ctypes.create_string_buffer(40), 0)))
attempt("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
attempt("F_SETLK", lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
attempt("inotify_init1", lambda: c(libc.inotify_init1(0)))
attempt("fanotify_init", lambda: c(libc.fanotify_init(0, 0)))
directory = os.open(os.path.dirname({str(CHANNEL)!r}), os.O_RDONLY)
attempt("F_NOTIFY", lambda: fcntl.fcntl(directory, 1026, 0x80000001))
attempt("F_SETLEASE", lambda: fcntl.fcntl(fd, 1024, fcntl.F_RDLCK))
attempt("socket(UDP)", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
attempt("socket(netlink)", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
attempt("bind(TCP, loopback)", lambda: socket.socket().bind(("127.0.0.1", 0)))
attempt("connect(TCP, loopback)", lambda: socket.socket().connect(("127.0.0.1", 9)))
print(json.dumps(out))
"""
"""Tries each call on the channel file; prints each one's outcome: ``ok`` or the errno's name."""
REFUSED = {
    "posix_fadvise(DONTNEED)": "ok",  # succeeds without effect
    "readahead": "ok",
    "preadv2(RWF_NOWAIT)": "ENOTSUP",  # EOPNOTSUPP
    "pwritev2(RWF_NOWAIT)": "ENOTSUP",  # EOPNOTSUPP
    "madvise(MADV_PAGEOUT)": "ok",
    "madvise(MADV_COLD)": "ok",
    "mincore": "EPERM",
    "cachestat": "EPERM",
    "flock": "ok",  # locks nothing
    "F_SETLK": "ok",
    "inotify_init1": "EPERM",
    "fanotify_init": "EPERM",
    "F_NOTIFY": "EPERM",
    "F_SETLEASE": "EPERM",
    "socket(UDP)": "EPERM",
    "socket(netlink)": "EPERM",
    "bind(TCP, loopback)": "EACCES",  # Landlock: no port held, none to connect to
    "connect(TCP, loopback)": "EACCES",
}

EVICT = f"""
import mmap, os
fd = os.open({str(CHANNEL)!r}, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
try:
    mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    mapped.madvise(21)
except OSError:
    pass
print(1)
"""
"""Evicts the channel file's pages from the host's page cache, as far as it can."""

LOCK = f"""
import fcntl, os, time
fd = os.open({str(CHANNEL)!r}, os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH)
fcntl.lockf(fd, fcntl.LOCK_SH)
fcntl.fcntl(fd, 37, bytes(32))  # F_OFD_SETLK, a read lock from 0 to the end
print(1, flush=True)
time.sleep(1.5)
"""
"""Holds every kind of lock it can take on the channel file for 1.5 s."""

ORDINARY = """
import fcntl, json, os, sqlite3, tempfile
out = {}
with sqlite3.connect("data.db") as db:
    db.execute("create table t (x)")
    db.executemany("insert into t values (?)", [(i,) for i in range(100)])
with sqlite3.connect("data.db") as db:
    out["sqlite"] = db.execute("select sum(x) from t").fetchone()[0]
with tempfile.TemporaryDirectory() as folder, open(os.path.join(folder, "f"), "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    fcntl.lockf(f, fcntl.LOCK_EX)
    f.write("x")
    out["tempfile"] = os.path.dirname(folder) == os.getcwd()
print(json.dumps(out))
"""
"""SQLite on disk, a temporary directory and locks on its own files: they keep working."""
ORDINARY_OUT = {"sqlite": 4950, "tempfile": True}


def cached_pages(path: Path = CHANNEL) -> int:
    """How many of the file's pages the host's page cache holds (read without caching)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        count = 0
        for offset in range(0, os.fstat(fd).st_size, PAGE):
            with contextlib.suppress(BlockingIOError):
                count += os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT) == 1
        return count
    finally:
        os.close(fd)


def cache_all(path: Path = CHANNEL) -> int:
    """Read the whole file into the page cache; its size in pages."""
    data = path.read_bytes()
    return (len(data) + PAGE - 1) // PAGE


def evict(paths: list[Path] = FILES) -> None:
    """Evict the attack's files from the host's page cache: a memory wiped clean."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def locks_free(path: Path = CHANNEL) -> dict[str, bool]:
    """Whether this process can take each kind of exclusive lock on ``path`` now."""
    out = {}
    fd = os.open(path, os.O_RDWR)
    try:
        for name, take, undo in (
            ("flock", lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), fcntl.LOCK_UN),
            ("lockf", lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), fcntl.LOCK_UN),
        ):
            try:
                take()
                out[name] = True
                (fcntl.flock if name == "flock" else fcntl.lockf)(fd, undo)
            except OSError:
                out[name] = False
    finally:
        os.close(fd)
    return out


ANSWERS = (1, 0, 1, 1)
HIDDEN = Problem(
    id="hidden",
    prompt="Write `answer(i)`.",
    entry_point="answer",
    tests=[
        TestCase(
            name="check",
            kind="check",
            code="def check(candidate):\n"
            + "".join(f"    assert candidate({i}) == {a}\n" for i, a in enumerate(ANSWERS)),
        )
    ],
)
"""A hidden check of four asserts, each a bit: the candidate learns which assert failed
(the call after it never comes), and an answer-free program passes once it remembers."""

MEMORY_ATTACK = f"""
import os
FILES = {[str(f) for f in FILES]!r}

def seen(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT) == 1
    except OSError:
        os.read(fd, 1)  # not cached (or not known): cache it
        return False
    finally:
        os.close(fd)

sample = 0  # how many samples ran before this one: a counter in unary
while sample < len(FILES) and seen(FILES[sample]):
    sample += 1

def answer(i):
    return sample >> i & 1
"""
"""The issue's attack: a program with no answer in it that counts its samples in the host's
page cache (a file read is a digit set, a read with ``RWF_NOWAIT`` reads it) and tries the
answers in turn. With that memory it passes `HIDDEN` by its 14th sample; without it every
sample is the first and fails."""
SAMPLES = 16

_DOCS = sorted(Path("/usr/share/doc").glob("*/copyright"))
ATIME_FILES = (_DOCS[-1], _DOCS[-2]) if len(_DOCS) > 26 else (CHANNEL, CHANNEL)
"""A file for the test as tracegen's own user, one for the test as ``nobody``: read by
nothing else here (the attack's `FILES` are read with access times under rlimit)."""


def atime_program(path: Path) -> str:
    """Reads ``path``; prints whether the system directories are mounted read-only."""
    return f"""
import json, os
with open({str(path)!r}, "rb") as f:
    f.read()
print(json.dumps([bool(os.statvfs(p).f_flag & os.ST_RDONLY) for p in ("/usr", "/bin")]))
"""


def stale_atime(path: Path) -> float:
    """Set ``path``'s access time a day before its modification time (so that reading it
    would update it, ``relatime`` or not); that access time."""
    stat = path.stat()
    os.utime(path, (stat.st_mtime - 86400, stat.st_mtime))
    return path.stat().st_atime
