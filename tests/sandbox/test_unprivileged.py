"""The built-in isolation for a user without root: tracegen run as uid ``nobody`` keeps the
same promises (no network, no files outside the execution's directory, no signal to the
user's other processes, no forged verdict) with no root and no external binary."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.forgeries import FORGERIES
from tests.support.unprivileged import NEEDS_ROOT, NOBODY, nobody_dir, run_script_as_nobody

pytestmark = NEEDS_ROOT

IMPORTS = """
import asyncio, concurrent.futures.thread, json, os, subprocess, sys
from tests.support.forgeries import FORGERIES, SQUARE
from tracegen.sandbox import Sandbox, SandboxLimits
"""
SCRIPT = r"""

os.environ.update(HOME={shared!r}, OLLAMA_API_KEY="sk-nobody-secret")

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


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory nobody can read and write: the files sandboxed code must not reach."""
    with nobody_dir() as path:
        yield path


@pytest.mark.slow
def test_builtin_isolation_holds_for_a_user_without_root(shared: Path) -> None:
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
            shared=str(shared),
            port=listener.getsockname()[1],
            outside=str(outside),
            secret=str(secret),
            unix=str(unix),
        )
        out = run_script_as_nobody(IMPORTS, script, cwd=shared, home=str(shared))
        with pytest.raises(BlockingIOError):
            listener.accept()
        svc.setblocking(False)
        with pytest.raises(BlockingIOError):
            svc.accept()
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
