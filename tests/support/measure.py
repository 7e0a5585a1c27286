"""Run a command as a child process and measure it: wall time, CPU time, peak memory.

The command runs under a small Python parent that forks it and reports its `os.wait4`
usage: measured straight from a large test process, a child would count the memory it
was forked with before it started the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_PARENT = """
import os, sys
report, args = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execvp(args[0], args)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as fh:
    fh.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float
    """User and system time of the command and the children it waited for: unlike
    ``seconds``, not stretched by other jobs on a busy machine."""
    peak_mb: float
    """Largest resident set of the command (or of a child of its own that it waited for)."""


def run_measured(
    args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 120
) -> Measured:
    """Run ``args`` to completion (its process group killed after ``timeout`` seconds)."""
    with tempfile.TemporaryDirectory() as folder:
        report, out, err = (Path(folder) / name for name in ("report", "out", "err"))
        start = time.monotonic()
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _PARENT, str(report), *args],
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
            timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
            timer.start()
            try:
                returncode = proc.wait()
            finally:
                timer.cancel()
        seconds = time.monotonic() - start
        maxrss_kb, cpu = report.read_text().split() if report.exists() else ("0", "inf")
        return Measured(
            returncode=returncode,
            stdout=out.read_text(errors="replace"),
            stderr=err.read_text(errors="replace"),
            seconds=seconds,
            cpu_seconds=float(cpu),
            peak_mb=int(maxrss_kb) / 1024,
        )
