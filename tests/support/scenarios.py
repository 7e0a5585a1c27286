"""Scenarios as a user meets them: the loopback servers by name, the arguments of a run, what
it wrote and which processes it left, small problem sets and a scripted model answering them."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from tests.support.backends import GENERATION_PATHS
from tests.support.fake_model import FakeModel
from tests.support.fake_ollama import FakeOllama, Reply
from tests.support.fake_openai import FakeOpenAI
from tracegen.problems import load_problems
from tracegen.schema import Problem

TRACEBACK = "Traceback (most recent call last)"
_TASK = re.compile(r"\(task ([\w-]+)\)")


SERVERS = {
    "ollama": FakeOllama,
    "openai": lambda **kw: FakeOpenAI("vllm", **kw),
    "llamacpp": lambda **kw: FakeOpenAI("llamacpp", **kw),
}
"""The loopback servers a scenario runs against, by name: Ollama's, and OpenAI-compatible ones
(vLLM's flavour; llama.cpp's, whose requests go through its own endpoints)."""


@contextlib.contextmanager
def serving(name: str, **options: Any) -> Iterator[tuple[FakeModel, str]]:
    """The stand-in called ``name``, started, and the ``--host`` to give for it."""
    with SERVERS[name](**options) as server:
        yield server, server.api if isinstance(server, FakeOpenAI) else server.url


def generations(server: FakeModel) -> list[dict[str, Any]]:
    """The bodies of the generation requests the server saw."""
    return [body for path, body, _ in server.requests if path in GENERATION_PATHS]


def seed_of(body: dict[str, Any]) -> int:
    """The sampling seed of a generation request, whatever its wire format."""
    return int(body["seed"] if "seed" in body else body["options"]["seed"])


def run_args(host: str, output: Path, *extra: str, mode: str = "markers") -> list[str]:
    """``tracegen run`` against ``test-model`` at ``host``, the default sandbox, to ``output``."""
    return [
        "run",
        "--mode",
        mode,
        "--model",
        "test-model",
        "--host",
        host,
        "-o",
        str(output),
        "--sandbox",
        "auto",
        *extra,
    ]


def unused_port() -> int:
    """A loopback port where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_jsonl(path: Path, rows: Iterable[object]) -> Path:
    """``rows`` as JSON lines in ``path``, as a user's file holds them."""
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path``; fails unless each is a whole JSON object (a missing file: [])."""
    if not path.exists():
        return []
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} ends with a partial line"
    rows = [orjson.loads(line) for line in data.splitlines()]
    assert all(isinstance(r, dict) for r in rows), f"{path} holds a line that is not an object"
    return rows


def episodes(*rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(problem, sample) of every record."""
    return [(r["problem_id"], r["sample"]) for group in rows for r in group]


def error_line(stderr: str) -> str:
    """The one line a failed command printed; fails if it printed more or a traceback."""
    assert TRACEBACK not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every live process descended from ``pid``."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: set[tuple[int, str]] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child[0])
    return found


def still_alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those of ``processes`` still running (a reused pid has another start time)."""
    return {(pid, start) for pid, start in processes if (s := _stat(pid)) and s[1] == start}


def wait_until_gone(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those of ``processes`` still alive after a few seconds."""
    deadline = time.monotonic() + 10
    while still_alive(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return still_alive(processes)


# ---------------------------------------------------------------- problems


def builtin(limit: int) -> list[Problem]:
    return load_problems("builtin", limit=limit)


def square_task(name: str) -> dict[str, Any]:
    """A problem asking for ``square(x)``, its id and prompt naming ``name``."""
    return {
        "id": name,
        "prompt": f"Write `square(x)` returning x * x (task {name}).",
        "entry_point": "square",
        "tests": [
            {"name": "three", "kind": "io", "args": [3], "expected": 9},
            {"name": "minus", "kind": "io", "args": [-2], "expected": 4},
        ],
    }


def write_problems(path: Path, problems: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in problems))
    return path


# ---------------------------------------------------------------- the scripted model


def user_text(body: dict[str, Any]) -> str:
    """The first user message of a chat request (or of a rendered prompt): the problem."""
    if "messages" not in body:
        return body["prompt"].split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
    return next(m["content"] for m in body.get("messages", []) if m.get("role") == "user")


def task_of(body: dict[str, Any]) -> str:
    """The ``(task NAME)`` a `square_task` request is about."""
    found = _TASK.search(user_text(body))
    assert found, "no task in the request"
    return found.group(1)


def problem_of(body: dict[str, Any], problems: list[Problem]) -> Problem:
    text = user_text(body)
    return next(p for p in problems if p.prompt.strip() in text)


def markers_reply(code: str) -> Reply:
    """An answer in the tag format: think, the program, think, verify."""
    return Reply(
        content=(
            f"<think>I write the function.</think>\n<code>\n{code}\n</code>\n"
            "<think>Now I check it.</think>\n<verify>Traced by hand: correct.</verify>"
        )
    )


def reference_solver(problems: list[Problem]) -> Callable[[str, dict[str, Any]], Reply]:
    """A model that answers every builtin problem with its reference solution."""

    def answer(path: str, body: dict[str, Any]) -> Reply:
        solution = problem_of(body, problems).reference_solution
        assert solution is not None
        return markers_reply(solution)

    return answer
