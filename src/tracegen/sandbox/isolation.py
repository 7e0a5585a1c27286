"""Choosing the isolation and building the command that starts the sandbox's zygote."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from tracegen.errors import SandboxError
from tracegen.sandbox.base import IsolationChoice, IsolationInfo

UID_BASE = 3_000_000_000
UIDS_PER_PROCESS = 256
"""As root, execution slot ``i`` of process ``pid`` runs under uid/gid
``UID_BASE + pid * UIDS_PER_PROCESS + i``: no two live tracegen processes share a uid."""
_free_slots = list(range(UIDS_PER_PROCESS - 1, -1, -1))


def take_uid() -> int:
    """An unprivileged uid no other execution of any live tracegen process is using."""
    if not _free_slots:
        raise SandboxError(f"more than {UIDS_PER_PROCESS} executions at once in one process")
    return UID_BASE + os.getpid() * UIDS_PER_PROCESS + _free_slots.pop()


def give_back_uid(uid: int) -> None:
    _free_slots.append((uid - UID_BASE) % UIDS_PER_PROCESS)


def process_uids(pid: int | None = None) -> range:
    """The uids the executions of tracegen process ``pid`` (this one by default) run under."""
    first = UID_BASE + (os.getpid() if pid is None else pid) * UIDS_PER_PROCESS
    return range(first, first + UIDS_PER_PROCESS)


SAFE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache")
ZYGOTE_CAPS = ("SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL")
_BWRAP_DETAIL = "bubblewrap: no network, read-only system directories, private /tmp, own PIDs"
_RLIMIT_DETAIL = "rlimits and process-group kill only: no network or filesystem isolation"


def running_as_root() -> bool:
    return os.geteuid() == 0


def python_executable() -> str:
    """The real interpreter (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(sys.executable)


def _under_system_dir(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


def _python_dirs() -> list[str]:
    dirs = [sys.base_prefix, os.path.dirname(python_executable())]
    out: list[str] = []
    for d in dirs:
        if not _under_system_dir(d) and not any(d.startswith(o + "/") for o in out):
            out.append(d)
    return out


def bwrap_command(bwrap: str, root: bool) -> list[str]:
    """bwrap's arguments up to ``--``: namespaces, read-only system, private /tmp."""
    args = [bwrap, "--die-with-parent", "--new-session"]
    if root:
        # No user namespace: the zygote is real root with a few capabilities and drops every
        # child to an unprivileged uid, so RLIMIT_NPROC counts (it never does for uid 0).
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        args += ["--unshare-cgroup-try"]
        for cap in ZYGOTE_CAPS:
            args += ["--cap-add", f"CAP_{cap}"]
    else:
        args += ["--unshare-all"]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    for d in _python_dirs():
        # bwrap copies the modes of missing parents (/root is 0700): create them traversable.
        for parent in reversed(Path(d).parents[:-1]):
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", d, d]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--"]


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
def _bwrap_problem() -> tuple[str | None, str | None]:
    """``(bwrap path, None)`` when bwrap runs the interpreter here, else ``(None, why not)``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bubblewrap (bwrap) is not installed"
    cmd = [*bwrap_command(bwrap, running_as_root()), python_executable(), "-I", "-S", "-c", ""]
    try:
        done = subprocess.run(cmd, env=SAFE_ENV, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"bwrap cannot run: {e}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return None, f"bwrap cannot run here: {lines[-1]}"
    return bwrap, None


def bwrap_path() -> str:
    bwrap, problem = _bwrap_problem()
    if bwrap is None:
        raise SandboxError(problem or "bubblewrap is unusable")
    return bwrap


def _uid_note() -> str:
    if running_as_root():
        return f"; each execution under its own unprivileged uid (from {UID_BASE})"
    return "; executions run under your uid"


def detect_isolation(choice: IsolationChoice | str = "auto") -> IsolationInfo:
    """What ``choice`` gives on this machine. Forcing ``bwrap`` where it is unusable raises."""
    if choice not in ("auto", "bwrap", "rlimit"):
        raise SandboxError(f"unknown sandbox {choice!r}: use auto, bwrap or rlimit")
    if choice == "rlimit":
        return IsolationInfo(name="rlimit", detail=_RLIMIT_DETAIL + _uid_note())
    bwrap, problem = _bwrap_problem()
    if bwrap is not None:
        return IsolationInfo(name="bwrap", detail=_BWRAP_DETAIL + _uid_note())
    if choice == "bwrap":
        raise SandboxError(f"--sandbox bwrap: {problem}")
    warning = f"{problem}; generated code runs with rlimits only (no network/filesystem isolation)"
    return IsolationInfo(name="rlimit", detail=_RLIMIT_DETAIL + _uid_note(), warning=warning)


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
