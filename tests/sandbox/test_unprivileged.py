"""The built-in isolation for a user without root: tracegen run as uid ``nobody`` keeps the
same promises (no network, no files outside the execution's directory, no signal to the
user's other processes, no forged verdict) with no root and no external binary."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.forgeries import FORGERIES

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")

SCRIPT = r"""
import asyncio, concurrent.futures.thread, json, os, subprocess, sys
sys.path.insert(0, {root!r})
from tests.support.forgeries import FORGERIES, SQUARE
from tracegen.sandbox import Sandbox, SandboxLimits, isolation

os.setgroups([])
os.setresgid({uid}, {uid}, {uid})
os.setresuid({uid}, {uid}, {uid})
os.environ.update(HOME={shared!r}, OLLAMA_API_KEY="sk-nobody-secret")
# The interpreter tracegen runs under may sit where nobody cannot go (a pyenv under
# /root); the sandbox needs only the standard library, so any Python {version} will do.
if not os.access(isolation.python_executable(), os.X_OK):
    isolation.python_executable = lambda: {system_python!r}

HOSTILE = {{
    "network": "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n",
    "write-outside": "open({outside!r}, 'w').write('x')\n",
    "read-user-file": "print(open({secret!r}).read())\n",
    "read-home": "import os\nprint(os.listdir({shared!r}))\n",
    "signal-user-processes": (
        "import os, signal\nhit = []\n"
        "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    if pid != os.getpid():\n"
        "        try:\n            os.kill(pid, signal.SIGKILL)\n            hit.append(pid)\n"
        "        except OSError:\n            pass\n"
        "print(hit)\n"
    ),
    "read-user-environ": (
        "import os\nfound = []\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    try:\n        data = open(f'/proc/{{pid}}/environ', 'rb').read()\n"
        "    except OSError:\n        continue\n"
        "    found += [pid] if b'sk-nobody-secret' in data else []\n"
        "print(found)\n"
    ),
    "unix-socket": "import socket\nsocket.socket(socket.AF_UNIX).connect({unix!r})\n",
}}

async def main():
    sleeper = subprocess.Popen(["sleep", "60"])
    out = {{"uid": os.getuid()}}
    limits = SandboxLimits(timeout_s=5, cpu_s=5, memory_mb=512, processes=64)
    async with Sandbox("builtin", limits=limits, concurrency=2) as sandbox:
        out["detail"], out["warning"] = sandbox.detail, sandbox.warning
        honest = await sandbox.run_tests("def square(x):\n    return x * x\n", SQUARE)
        out["honest"] = honest.status
        for name, code in FORGERIES.items():
            r = await sandbox.run_tests(code, SQUARE)
            out["forgery:" + name] = [r.status, [t.name for t in r.tests if t.passed]]
        for name, code in HOSTILE.items():
            r = await sandbox.run_code(code)
            out["hostile:" + name] = [r.status, r.stdout, (r.error or "")[:200]]
    out["sleeper_alive"] = sleeper.poll() is None
    sleeper.kill()
    print(json.dumps(out))

asyncio.run(main())
"""


def _system_python() -> str | None:
    """A Python of the same minor version that every uid can run."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory nobody can read and write: the files sandboxed code must not reach."""
    path = Path(tempfile.mkdtemp(prefix="tracegen-nobody-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_builtin_isolation_holds_for_a_user_without_root(shared: Path) -> None:
    system_python = _system_python()
    if system_python is None:
        pytest.skip("no Python of this version that uid nobody can run")
    secret = shared / "credentials"
    secret.write_text("sk-file-secret")
    secret.chmod(0o644)
    outside = shared / "escaped"
    unix = shared / "service.sock"
    with socket.create_server(("127.0.0.1", 0)) as listener, socket.socket(socket.AF_UNIX) as svc:
        svc.bind(str(unix))
        svc.listen()
        unix.chmod(0o777)
        listener.setblocking(False)
        script = SCRIPT.format(
            root=str(ROOT),
            uid=NOBODY,
            shared=str(shared),
            version=f"{sys.version_info.major}.{sys.version_info.minor}",
            system_python=system_python,
            port=listener.getsockname()[1],
            outside=str(outside),
            secret=str(secret),
            unix=str(unix),
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=shared,
            capture_output=True,
            text=True,
            timeout=240,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(shared)},
        )
        assert done.returncode == 0, done.stderr
        with pytest.raises(BlockingIOError):
            listener.accept()
        svc.setblocking(False)
        with pytest.raises(BlockingIOError):
            svc.accept()
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["uid"] == NOBODY
    assert "user+net namespaces (no network)" in out["detail"] and out["warning"] is None
    assert "landlock ABI" in out["detail"], out["detail"]
    assert out["honest"] == "ok"
    forged = {k: v for k, v in out.items() if k.startswith("forgery:") and (v[0] == "ok" or v[1])}
    assert forged == {}
    assert len([k for k in out if k.startswith("forgery:")]) == len(FORGERIES)
    assert out["hostile:network"][0] == "error"
    assert out["hostile:write-outside"][0] == "error" and not outside.exists()
    assert "sk-file-secret" not in out["hostile:read-user-file"][1]
    assert out["hostile:read-home"][0] == "error"
    assert out["hostile:signal-user-processes"][1].strip() in ("[]", "")
    assert out["sleeper_alive"], "sandboxed code killed another process of the user"
    assert out["hostile:read-user-environ"][1].strip() in ("[]", "")
    assert out["hostile:unix-socket"][0] == "error"
