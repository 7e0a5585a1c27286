"""math-verify (Hugging Face's ``math-verify``) in a worker process with a deadline.

math-verify bounds its own work with ``signal.alarm``, which only a main thread may use:
in a thread, an async event loop's executor or a Ray actor it would run unbounded (TRL's
``accuracy_reward`` turns its timeouts off there). So every check runs in one small worker
process, in its main thread with math-verify's own timeouts on, and the caller waits at most
`DEADLINE_S`: a worker that has not answered by then is killed (the check is undecided,
``None``) and a fresh one is started for the next check. Any thread may call `math_verify`.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from typing import Final

import orjson

TIMEOUT_S: Final = 5
"""math-verify's own timeouts (parsing, then verifying) in the worker."""
DEADLINE_S: Final = 20.0
"""How long a caller waits for the worker's answer (its start included)."""

_WORKER = r"""
import json, sys
from math_verify import parse, verify
print("ready", flush=True)
for line in sys.stdin:
    gold_text, answer_text, timeout = json.loads(line)
    try:
        gold = parse(gold_text, parsing_timeout=timeout)
        answer = parse(answer_text, parsing_timeout=timeout)
        verdict = bool(verify(gold, answer, timeout_seconds=timeout)) if gold and answer else None
    except Exception:
        verdict = None
    print(json.dumps(verdict), flush=True)
"""


class _Worker:
    """One worker process; `ask` sends a check and waits for the answer until a deadline."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer = b""
        self.ready = False

    def _line(self, deadline: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def ask(self, gold: str, answer: str, deadline: float) -> tuple[bool, bool | None]:
        """(answered, verdict)."""
        if not self.ready:
            if self._line(deadline) != b"ready":
                return False, None
            self.ready = True
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(orjson.dumps([gold, answer, TIMEOUT_S]) + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return False, None
        line = self._line(deadline)
        if line is None:
            return False, None
        verdict = orjson.loads(line)
        return True, verdict if isinstance(verdict, bool) else None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


_lock = threading.Lock()
_worker: _Worker | None = None


def math_verify(gold: str, answer: str, deadline_s: float = DEADLINE_S) -> bool | None:
    """math-verify's ``verify(parse(gold), parse(answer))`` (gold first: it is not
    symmetric); None when either does not parse or no answer came within ``deadline_s``."""
    global _worker
    with _lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
        answered, verdict = _worker.ask(gold, answer, time.monotonic() + deadline_s)
        if not answered:
            _worker.kill()
            _worker = None
        return verdict
