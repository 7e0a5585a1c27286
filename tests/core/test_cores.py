"""The cores tracegen may use: the CPU affinity held to a cgroup's CPU quota, read from
``/proc/PID/cgroup`` and ``/proc/PID/mountinfo`` as the kernel writes them (cgroup v1 and v2,
a container's view, escaped mount points), and on the real kernel where a quota can be set."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.runs import clean_env
from tracegen import cores
from tracegen.cores import cpu_quota, usable_cores

V1_CPU = "30 25 0:26 {root} {point} rw,nosuid,relatime shared:13 - cgroup cgroup rw,cpu,cpuacct"
V1_MEMORY = "31 25 0:27 / {point} rw,nosuid shared:14 - cgroup cgroup rw,memory"
V2 = "36 35 0:30 {root} {point} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw"


def fake_proc(tmp_path: Path, cgroup: str, *mounts: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("\n".join(mounts) + "\n")
    return proc


def limit(folder: Path, *, v2: str | None = None, quota_us: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if v2 is not None:
        (folder / "cpu.max").write_text(v2 + "\n")
    if quota_us is not None:
        (folder / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")


def test_v2_takes_the_tightest_quota_from_the_cgroup_up(tmp_path: Path) -> None:
    mount = tmp_path / "cgroup"
    limit(mount / "job" / "step", v2="max 100000")
    limit(mount / "job", v2="150000 100000")
    limit(mount, v2="400000 100000")
    proc = fake_proc(tmp_path, "0::/job/step\n", V2.format(root="/", point=mount))
    assert cpu_quota(proc) == 1.5


def test_v1_reads_the_cfs_quota_of_the_cpu_hierarchy(tmp_path: Path) -> None:
    cpu, memory = tmp_path / "cpu,cpuacct", tmp_path / "memory"
    limit(cpu / "slurm" / "job_7", quota_us=200000)
    limit(cpu / "slurm", quota_us=-1)
    limit(memory / "slurm" / "job_7", quota_us=10000)  # not the CPU controller: not read
    proc = fake_proc(
        tmp_path,
        "4:memory:/slurm/job_7\n3:cpu,cpuacct:/slurm/job_7\n0::/\n",
        V1_MEMORY.format(point=memory),
        V1_CPU.format(root="/", point=cpu),
    )
    assert cpu_quota(proc) == 2.0


def test_a_containers_own_cgroup_is_its_mounts_root(tmp_path: Path) -> None:
    """In a container the mount's root is the container's cgroup, and the process's path is
    either that same path or, in a cgroup namespace, ``/``."""
    mount = tmp_path / "cgroup"
    limit(mount, v2="50000 100000")
    for path in ("/docker/3f2a", "/"):
        proc = fake_proc(tmp_path, f"0::{path}\n", V2.format(root="/docker/3f2a", point=mount))
        assert cpu_quota(proc) == 0.5
        (proc / "cgroup").unlink()
        (proc / "mountinfo").unlink()
        proc.rmdir()


def test_a_mount_point_with_a_space_is_unescaped(tmp_path: Path) -> None:
    mount = tmp_path / "cgroup fs"
    limit(mount, v2="100000 100000")
    proc = fake_proc(
        tmp_path, "0::/\n", V2.format(root="/", point=str(mount).replace(" ", "\\040"))
    )
    assert cpu_quota(proc) == 1.0


def test_a_path_that_climbs_out_of_the_mount_reads_no_folder_outside_it(tmp_path: Path) -> None:
    """A cgroup namespace shows a process outside it as ``/../…``: no file above the mount
    is read, and a malformed line is passed over."""
    mount = tmp_path / "cgroup"
    limit(mount, v2="300000 100000")
    limit(tmp_path / "escape", v2="10000 100000")  # would be read by following the ".."
    proc = fake_proc(tmp_path, "garbage\n0::/../escape\n", V2.format(root="/", point=mount))
    assert cpu_quota(proc) == 3.0


@pytest.mark.parametrize(
    ("cgroup", "files"),
    [
        ("0::/job\n", {"job/cpu.max": "max 100000"}),  # unlimited
        ("0::/job\n", {}),  # no CPU controller enabled there
        ("0::/job\n", {"job/cpu.max": "garbage"}),
        ("1:name=systemd:/\n", {"cpu.max": "100000 100000"}),  # no v2 line for this process
    ],
)
def test_no_quota_is_none(tmp_path: Path, cgroup: str, files: dict[str, str]) -> None:
    mount = tmp_path / "cgroup"
    mount.mkdir()
    for name, text in files.items():
        (mount / name).parent.mkdir(parents=True, exist_ok=True)
        (mount / name).write_text(text)
    assert cpu_quota(fake_proc(tmp_path, cgroup, V2.format(root="/", point=mount))) is None
    assert cpu_quota(tmp_path / "no-such-proc") is None


@pytest.mark.parametrize(("quota", "usable"), [(None, 2), (0.5, 1), (1.5, 1), (2.0, 2), (8.0, 2)])
def test_usable_cores_is_the_affinity_held_to_the_quota(
    monkeypatch: pytest.MonkeyPatch, quota: float | None, usable: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(cores, "cpu_quota", lambda: quota)
    assert usable_cores() == usable


def _cpu_hierarchy() -> Path | None:
    """Where this kernel's CPU controller can be given a child cgroup with a quota."""
    for point, quota in (
        (Path("/sys/fs/cgroup/cpu"), "cpu.cfs_quota_us"),
        (Path("/sys/fs/cgroup/cpu,cpuacct"), "cpu.cfs_quota_us"),
        (Path("/sys/fs/cgroup"), "cgroup.subtree_control"),
    ):
        if (point / quota).exists() and os.access(point, os.W_OK):
            return point
    return None


def test_a_tracegen_under_a_real_cpu_quota_uses_that_many_cores() -> None:
    point = _cpu_hierarchy()
    if os.geteuid() != 0 or point is None:
        pytest.skip("no writable cgroup CPU controller here (needs root)")
    if (
        point == Path("/sys/fs/cgroup")
        and "cpu" not in (point / "cgroup.subtree_control").read_text()
    ):
        pytest.skip("the cgroup v2 CPU controller is not enabled for child cgroups here")
    group = point / f"tracegen-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if (group / "cpu.max").exists():
            (group / "cpu.max").write_text("100000 100000\n")
        else:
            (group / "cpu.cfs_period_us").write_text("100000\n")
            (group / "cpu.cfs_quota_us").write_text("100000\n")
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys\n"
                f"open({str(group / 'cgroup.procs')!r}, 'w').write('0')\n"
                "from tracegen.cores import cpu_quota, usable_cores\n"
                "from tracegen.llm.local import choose_threads\n"
                "print(cpu_quota(), usable_cores())\n"
                "print(*choose_threads(), sep='\\n')\n",
            ],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        quota, threads, why = done.stdout.splitlines()
        assert quota.split() == ["1.0", "1"]
        assert threads == "1"  # the embedded model's threads
        if len(os.sched_getaffinity(0)) > 1:
            assert "at most 1 by the CPU quota" in why
    finally:
        group.rmdir()
