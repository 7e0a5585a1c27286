"""tracegen run as uid ``nobody``, for the tests of the sandbox for a user without root: a
script made to drop root first, a directory that user can use, and its run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import tracegen

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[2]
SRC = Path(tracegen.__file__).resolve().parents[1]
"""The tracegen under test, which the script imports whatever is installed."""
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")

_PATH = r"""
import sys
sys.path[:0] = [{src!r}, {root!r}]  # the tracegen under test and its tests
"""
_BECOME_NOBODY = r"""
import os
from tracegen.sandbox import isolation
os.setgroups([])
os.setresgid({uid}, {uid}, {uid})
os.setresuid({uid}, {uid}, {uid})
# The interpreter tracegen runs under may sit where nobody cannot go (a pyenv under
# /root); the sandbox needs only the standard library, so any Python {version} will do.
if not os.access(isolation.python_executable(), os.X_OK):
    isolation.python_executable = lambda: {python!r}
    isolation._python_dirs = lambda: []  # bwrap: the system's Python is under /usr
"""


def system_python() -> str | None:
    """A Python of the same minor version that every uid can run."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@contextmanager
def nobody_dir(prefix: str = "tracegen-nobody-", *, mode: int = 0o777) -> Iterator[Path]:
    """A directory ``nobody`` can read and write (``mode=0o755``: only read, as a user's
    files usually are to every uid), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(mode)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_script_as_nobody(
    imports: str, script: str, *, cwd: Path | None = None, home: str = "/", timeout: float = 240
) -> dict[str, Any]:
    """Run ``imports`` as root (the interpreter's own modules may be where ``nobody`` cannot
    read), then ``script`` as ``nobody`` (skipping where no Python is there for it); the JSON
    its last line of output holds."""
    python = system_python()
    if python is None:
        pytest.skip("no Python of this version that uid nobody can run")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    path = _PATH.format(src=str(SRC), root=str(ROOT))
    become = _BECOME_NOBODY.format(uid=NOBODY, version=version, python=python)
    done = subprocess.run(
        [sys.executable, "-c", path + imports + become + script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home},
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out
