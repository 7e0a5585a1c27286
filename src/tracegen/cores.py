"""The cores tracegen may run on, and how busy other work keeps them.

`usable_cores` is what the CPU affinity allows, held to the CPU quota of the process's control
group where one is set (``docker run --cpus 1``, a Kubernetes CPU limit, a Slurm job's
cgroup): the quota of the process's own cgroup and of every cgroup above it, the tightest
winning, as the kernel throttles by each. `busy_cores` samples ``/proc/stat``.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path, PurePosixPath

SAMPLE_S = 0.25
"""How long `busy_cores` watches the cores by default."""
_ESCAPE = re.compile(r"\\([0-7]{3})")


def affinity_cores() -> int:
    """The cores this process may be scheduled on (its CPU affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores' worth of CPU this process may use: its CPU affinity, at most its cgroup's CPU
    quota (rounded down, at least 1)."""
    cores = affinity_cores()
    quota = cpu_quota()
    return cores if quota is None else max(1, min(cores, math.floor(quota)))


def cpu_quota(proc: Path = Path("/proc/self")) -> float | None:
    """The CPUs' worth of time the cgroup CPU controller allows the process whose ``/proc``
    directory is ``proc`` (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``), the tightest from its cgroup up to the mount's root; None when
    nothing limits it or nothing can be read."""
    try:
        cgroups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    tightest: float | None = None
    for mount_root, mount_point, version in _cpu_mounts(mounts):
        path = _cgroup_path(cgroups, version)
        if path is None:
            continue
        # Outside the mount's root (a cgroup namespace's view), the mount is the process's.
        under = _under(path, mount_root)
        parts = PurePosixPath(path).relative_to(mount_root).parts if under else ()
        leaf = Path(mount_point, *parts) if ".." not in parts else Path(mount_point)
        for folder in (leaf, *leaf.parents):
            quota = _quota(folder, version)
            if quota is not None and (tightest is None or quota < tightest):
                tightest = quota
            if folder == Path(mount_point):
                break
    return tightest


def _cpu_mounts(mounts: list[str]) -> list[tuple[str, str, int]]:
    """(cgroup path at the mount's root, mount point, cgroup version) of each mount of the CPU
    controller, from ``/proc/PID/mountinfo``."""
    found = []
    for line in mounts:
        fields, _, rest = line.partition(" - ")
        before, after = fields.split(), rest.split()
        if len(before) < 5 or len(after) < 3:
            continue
        root, point = before[3], _unescape(before[4])
        if after[0] == "cgroup2":
            found.append((root, point, 2))
        elif after[0] == "cgroup" and "cpu" in after[2].split(","):
            found.append((root, point, 1))
    return found


def _cgroup_path(cgroups: list[str], version: int) -> str | None:
    """The process's cgroup in the hierarchy of ``version`` (v1: the one with ``cpu``)."""
    for line in cgroups:
        number, _, rest = line.partition(":")
        controllers, colon, path = rest.partition(":")
        if not colon:
            continue
        if version == 2 and number == "0" and controllers == "":
            return path
        if version == 1 and "cpu" in controllers.split(","):
            return path
    return None


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _quota(folder: Path, version: int) -> float | None:
    """The CPUs' worth of time ``folder``'s own limit allows; None when it sets none."""
    try:
        if version == 2:
            limit, period = (folder / "cpu.max").read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(period)
        limit_us = int((folder / "cpu.cfs_quota_us").read_text())
        period_us = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if limit_us < 0 or period_us <= 0 else limit_us / period_us


def _unescape(field: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` for a space) undone."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 8)), field)


def busy_cores(window_s: float = SAMPLE_S) -> float:
    """How many of this process's cores (`affinity_cores`) other work keeps busy: their busy time in
    ``/proc/stat`` over ``window_s`` less this process's own CPU, in cores. Where there is no
    ``/proc/stat``, the 1-minute load average."""
    try:
        ticks = _busy_ticks()
        own = time.process_time()
        time.sleep(window_s)
        ticks, own = _busy_ticks() - ticks, time.process_time() - own
    except (OSError, ValueError, AttributeError):
        return min(os.getloadavg()[0], affinity_cores())
    return max(0.0, ticks / os.sysconf("SC_CLK_TCK") - own) / window_s


def _busy_ticks() -> int:
    """Clock ticks the cores of this process's affinity have spent on anything but idling,
    since boot."""
    usable = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    total = 0
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            name, *fields = line.split()
            if name.decode() in usable:
                user, nice, system, _idle, _iowait, *rest = map(int, fields[:8])
                total += user + nice + system + sum(rest)
    return total
