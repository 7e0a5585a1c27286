"""Run a command as a child process and measure it: wall time and its peak memory."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float
    """User and system time of the child and the children it waited for: unlike ``seconds``,
    not stretched by other jobs on a busy machine."""
    peak_mb: float
    """Largest resident set of the child (or of a child of its own that it waited for)."""


def run_measured(
    args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 120
) -> Measured:
    """Run ``args`` to completion (killed after ``timeout`` seconds), output captured."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            returncode=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            seconds=seconds,
            cpu_seconds=usage.ru_utime + usage.ru_stime,
            peak_mb=usage.ru_maxrss / 1024,
        )
