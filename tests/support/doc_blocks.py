"""The documentation's fenced blocks, and running one as a reader would: with bash, in a
folder of its own, the Python that runs the tests first on ``PATH``, offline.

Pages that run a policy server (``python -m tracegen.serve --port 8080``) get one on a free
port instead (`policy_server`), the machine being shared."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests.support.llamacpp import tracegen_serve

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = "<!-- runnable -->"
"""The line that marks the block after it as runnable on any machine, as written."""
POLICY = "127.0.0.1:8080"
"""Where the pages' policy server (``python -m tracegen.serve --port 8080``) listens."""

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: str
    """The page, relative to the repository (``docs/rl.md``)."""
    line: int
    """The line of its opening fence."""
    lang: str
    body: str
    runnable: bool
    """Right after a ``<!-- runnable -->`` line."""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    text = page.read_text()
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].removesuffix("\n").rsplit("\n", 1)[-1]
        line = text[: m.start()].count("\n") + 1
        name = str(page.relative_to(ROOT))
        found.append(Block(name, line, m.group(1), m.group(2), before.strip() == RUNNABLE))
    return found


def reader_env(**extra: str) -> dict[str, str]:
    """A reader's environment: no tracegen or Ollama settings of the caller's, the tests'
    Python first on ``PATH``, no hub, no wandb."""
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    env |= {"PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    return env | {"WANDB_MODE": "disabled", "TRANSFORMERS_OFFLINE": "1"} | extra


def run_block(
    script: str, cwd: Path, *, timeout: float, lang: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``script`` run to its end: a ``python`` block by Python, any other by
    ``bash -euo pipefail``."""
    shell = ["bash", "-euo", "pipefail"] if lang != "python" else [sys.executable]
    return subprocess.run(
        [*shell, "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=reader_env() if env is None else env,
        timeout=timeout,
        check=False,
    )


@contextlib.contextmanager
def block_in_background(
    script: str, cwd: Path, *, output: IO[str] | int = subprocess.DEVNULL
) -> Iterator[subprocess.Popen[str]]:
    """``script`` run by bash in a session of its own, its output to ``output``; on leaving,
    the session is interrupted (SIGINT, as a reader stops it), then what is left of it (jobs
    started with ``&`` ignore SIGINT) is terminated, killed if it outlives a minute."""
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=reader_env(),
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 60), (signal.SIGKILL, 60)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait)
                if sig != signal.SIGINT:
                    break


@contextlib.contextmanager
def policy_server() -> Iterator[str]:
    """The pages' ``python -m tracegen.serve``, on a free port, once it serves: its
    ``host:port``."""
    with tracegen_serve() as (url, _):
        yield url.removeprefix("http://").removesuffix("/v1")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_it_answers(url: str, proc: subprocess.Popen[str], what: Callable[[], str]) -> None:
    """Until ``url`` answers at all (any status), while ``proc`` runs, two minutes at most;
    ``what`` says what went wrong."""
    deadline = time.monotonic() + 120
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, what()
            time.sleep(0.3)
