"""Programs that reach for kernel objects an execution must neither keep nor share: SysV
shared memory, message queues and semaphores left behind under fixed keys, new namespaces,
unix sockets; and the ordinary code the seccomp filter must leave alone. Each prints JSON."""

from __future__ import annotations

SHM_MB = 200
SHM_KEYS = (0x7ACE1, 0x7ACE2, 0x7ACE3)
QUEUE_KEY, SEMAPHORES_KEY = 0x7ACE4, 0x7ACE5
SHM_LEFT = f"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = []
for key in {SHM_KEYS!r}:
    shmid = libc.shmget(key, {SHM_MB} << 20, 0o1666)
    if shmid < 0:
        continue
    address = libc.shmat(shmid, None, 0)
    if address in (None, 2**64 - 1):  # (void *) -1: not attached
        continue
    ctypes.memset(address, 0x5A, {SHM_MB} << 20)
    libc.shmdt(ctypes.c_void_p(address))
    made.append(shmid)
print(json.dumps(made))
"""
"""Leaves up to three 200 MB SysV segments, filled, under fixed keys."""

SHM_READ = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0x7ACE1, 0, 0)
byte = None
if shmid >= 0:
    byte = ctypes.string_at(libc.shmat(shmid, None, 0), 1).hex()
print(json.dumps(byte))
"""
"""What a later execution finds under the first key: null when there is no segment."""

QUEUE_LEFT = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
queue = libc.msgget(0x7ACE4, 0o1666)
message = ctypes.create_string_buffer(b"\\x01\\0\\0\\0\\0\\0\\0\\0sk-left-in-a-queue")
sent = queue >= 0 and libc.msgsnd(queue, message, 18, 0) == 0
semaphores = libc.semget(0x7ACE5, 4, 0o1666)
print(json.dumps([sent, semaphores >= 0]))
"""
"""Leaves a message queue with a message and a semaphore set, under fixed keys."""

QUEUE_READ = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
queue = libc.msgget(0x7ACE4, 0)
message = ctypes.create_string_buffer(64)
size = libc.msgrcv(queue, message, 56, 0, 0o4000) if queue >= 0 else -1
print(json.dumps([message.raw[8 : 8 + max(size, 0)].decode(), libc.semget(0x7ACE5, 0, 0)]))
"""
"""The message under the queue's key (empty when none) and the semaphore set's id (-1)."""

_SIGCHLD = 17
DENIED = {
    **{
        f"unshare(CLONE_NEW{name})": f"libc.unshare({flag:#x})"
        for name, flag in (
            ("USER", 0x10000000),
            ("NET", 0x40000000),
            ("NS", 0x00020000),
            ("PID", 0x20000000),
            ("IPC", 0x08000000),
            ("UTS", 0x04000000),
            ("CGROUP", 0x02000000),
        )
    },
    "unshare(CLONE_NEWUSER|CLONE_NEWNET)": "libc.unshare(0x50000000)",
    "clone(CLONE_NEWUSER)": f"child(libc.syscall(56, {0x10000000 | _SIGCHLD:#x}, 0, 0, 0, 0))",
    "clone(CLONE_NEWNET)": f"child(libc.syscall(56, {0x40000000 | _SIGCHLD:#x}, 0, 0, 0, 0))",
    "setns": "libc.setns(os.open('/proc/self/ns/net', os.O_RDONLY), 0)",
    "socket(AF_UNIX)": "socket.socket(socket.AF_UNIX).fileno() and 0",
    "socket(AF_UNIX, SOCK_DGRAM)": "socket.socket(1, socket.SOCK_DGRAM).fileno() and 0",
    # A pair of unix sockets is allowed (asyncio wakes itself through one), of no other kind;
    # descriptors never cross a socket: sendmsg is the only call that carries them.
    "socketpair(AF_INET)": "socket.socketpair(socket.AF_INET)[0].fileno() and 0",
    "sendmsg": "socket.socketpair()[0].sendmsg([b'x']) and 0",
    "sendmsg(SCM_RIGHTS)": "socket.send_fds(socket.socketpair()[0], [b'x'], [0]) and 0",
    # The user keyring (-4) is the uid's, not the execution's: what one execution left
    # there, the next of the same uid would read (a key id > 0 when the kernel let it).
    "add_key": "min(libc.syscall(248, b'user', b'left', b'x', 1, -4), 0)",
    "request_key": "min(libc.syscall(249, b'user', b'left', None, -4), 0)",
    "keyctl": "min(libc.syscall(250, 10, -4, b'user', b'left', 0), 0)",  # KEYCTL_SEARCH
    # Another process's limits: of the same uid (tracegen run without root), the kernel
    # lets a program lower those of tracegen, its zygote or its judge.
    "prlimit64(another process)": (
        "libc.syscall(302, os.getppid(), 7, None, ctypes.create_string_buffer(16))"
    ),
}
"""What the seccomp filter refuses: the expression, 0 (or a socket) when the kernel let it."""

DENIALS = (
    "import ctypes, json, os, socket\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "def child(pid):\n    if pid == 0:\n        os._exit(0)\n"
    "    if pid > 0:\n        os.waitpid(pid, 0)\n    return min(pid, 0)\n"
    "out = {}\n"
    + "".join(
        f"try:\n    out[{name!r}] = 'allowed' if {call} == 0 else os.strerror(ctypes.get_errno())\n"
        f"except OSError as e:\n    out[{name!r}] = e.strerror\n"
        for name, call in DENIED.items()
    )
    + "print(json.dumps(out))\n"
)
"""Tries each of `DENIED`; prints each one's outcome: ``allowed`` or the error's text."""

ORDINARY = """
import concurrent.futures, ctypes, errno, json, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
out = {}
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    out["threads"] = sum(pool.map(abs, range(-100, 0)))
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["subprocess"] = subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout
out["clone3"] = errno.errorcode.get(ctypes.get_errno()) if libc.syscall(435, None, 0) < 0 else 0
import asyncio, socket
a, b = socket.socketpair()
a.send(b"pair")
out["socketpair"] = b.recv(4).decode()
out["asyncio"] = asyncio.run(asyncio.sleep(0, "loop"))
print(json.dumps(out))
"""
"""Threads, fork, subprocess, a socket pair and asyncio's event loop work; ``clone3`` reads as
absent (the C library falls back)."""
ORDINARY_OUT = {
    "threads": 5050,
    "fork": 7,
    "subprocess": "hi\n",
    "clone3": "ENOSYS",
    "socketpair": "pair",
    "asyncio": "loop",
}


def shmem_mb() -> int:
    """The host's shared memory in use, from ``/proc/meminfo``."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no Shmem line in /proc/meminfo")
