"""Serving a hub's ASGI app in the test process, and the problems its tests run.

An ASGI app (a hub's own FastAPI server) served by uvicorn on a free loopback port, in a
thread of the test process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.scenarios import write_jsonl


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app``; yields its base URL, stops it on exit."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def add_problems(path: Path, count: int) -> Path:
    """``count`` problems (``add0``, ``add1``…) asking for ``add(a, b)``, two tests each."""
    tests = [
        {"name": "small", "kind": "io", "args": [1, 2], "expected": 3},
        {"name": "negative", "kind": "io", "args": [-4, 1], "expected": -3},
    ]
    rows = [
        {"id": f"add{i}", "prompt": "Write add(a, b) returning a + b.", "entry_point": "add",
         "tests": tests}
        for i in range(count)
    ]  # fmt: skip
    return write_jsonl(path, rows)
