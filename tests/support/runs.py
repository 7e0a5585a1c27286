"""Runs as tests make them: a small problem set, a scripted model that solves some of it,
tracegen in a child process.

Problem ``pN`` asks for ``add(a, b)``. The fake model answers in the ``markers`` format:
correctly and with an ideal shape, except that problems whose number is a multiple of 3
get a wrong program (a failure) and multiples of 5 a right one with no ``<verify>`` (success,
not ideal).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.support.fake_ollama import FakeOllama, Reply

ROOT = Path(__file__).resolve().parents[2]
_PROBLEM = re.compile(r"\(problem p(\d+)\)")

IDEAL = (
    "<think>I add the two numbers.</think>\n<code>\ndef add(a, b):\n    return {ret}\n</code>\n"
    "<think>Check it on an example.</think>\n<verify>add(1, 2) == 3</verify>"
)
NO_VERIFY = "<think>Adding.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>"
CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(1 + 2)"}}</tool_call>'
SOLUTION = "def add(a, b):\n    return a + b\n"


def partial_of(body: dict[str, Any]) -> str:
    """The assistant message being continued: last in the messages, or the end of a
    llama.cpp prompt rendered by the server."""
    if "messages" in body:
        last = body["messages"][-1]
        return last["content"] if last["role"] == "assistant" else ""
    return body["prompt"].rsplit("<|im_start|>assistant\n", 1)[-1]


def inline_solver(path: str, body: dict[str, Any]) -> Reply:
    """A model that calls the tool once in its thinking, then writes the program."""
    if "<tool_response>" not in partial_of(body):
        return Reply(content=f"<think>Let me check.\n{CALL}")
    return Reply(content=f" It prints 3.</think>\n<code>\n{SOLUTION}</code>")


def problem_number(body: dict[str, Any]) -> int:
    """Which problem a chat request is about (from the first user message)."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            found = _PROBLEM.search(message["content"])
            if found:
                return int(found.group(1))
    raise AssertionError("no problem in the request")


def solver(path: str, body: dict[str, Any]) -> Reply:
    n = problem_number(body)
    if n % 3 == 0:
        return Reply(content=IDEAL.format(ret="a - b"))
    if n % 5 == 0:
        return Reply(content=NO_VERIFY)
    return Reply(content=IDEAL.format(ret="a + b"))


def expected_success(n: int) -> bool:
    return n % 3 != 0


def expected_ideal(n: int) -> bool:
    return n % 3 != 0 and n % 5 != 0


def write_problems(path: Path, count: int) -> Path:
    with path.open("wb") as fh:
        for i in range(count):
            fh.write(
                orjson.dumps(
                    {
                        "id": f"p{i}",
                        "prompt": f"Write add(a, b) returning the sum (problem p{i}).",
                        "entry_point": "add",
                        "tests": [
                            {"name": "small", "kind": "io", "args": [1, 2], "expected": 3},
                            {"name": "negative", "kind": "io", "args": [-4, 1], "expected": -3},
                        ],
                    }
                )
                + b"\n"
            )
    return path


def read(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file (which must all be valid JSON)."""
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def keys(*paths: Path) -> list[tuple[str, int]]:
    return [(r["problem_id"], r["sample"]) for p in paths for r in read(p)]


@dataclass
class Workspace:
    """A folder with a problem set and the paths of a run's files."""

    dir: Path
    problems: Path
    out: Path
    rejects: Path

    @classmethod
    def with_problems(cls, folder: Path, count: int) -> Workspace:
        """``count`` problems (`write_problems`) in ``folder``, and the run's files there."""
        return cls(
            dir=folder,
            problems=write_problems(folder / "problems.jsonl", count),
            out=folder / "traces.jsonl",
            rejects=folder / "rejects.jsonl",
        )

    def args(self, server: FakeOllama | str, *extra: str) -> list[str]:
        url = server if isinstance(server, str) else server.url
        return [
            "run",
            "--mode",
            "markers",
            "--model",
            "test-model",
            "--host",
            url,
            "--problems",
            str(self.problems),
            "-o",
            str(self.out),
            "--sandbox",
            "rlimit",
            *extra,
        ]


def clean_env() -> dict[str, str]:
    """The environment of a tracegen the tests start: none of the user's settings, and the
    embedded model on one thread (the tests share the cores with other test workers, which
    start and stop; the default, one thread per idle core, is tested on its own)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_", "OPENAI_"))
    }
    env["TRACEGEN_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``tracegen ARGS`` in a child process (for signals), output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "tracegen", *args],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def wait_for_records(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    """Wait until ``path`` holds ``count`` lines (or the process ended)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ended = proc.poll() is not None
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        if ended:
            break
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {count} lines")


def child_env(**extra: str) -> dict[str, str]:
    """This environment without tracegen/Ollama settings, plus ``extra``."""
    return {**clean_env(), **extra}


def command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "tracegen", *args]


def tracegen(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 240, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``tracegen ARGS`` to completion in a child process, output captured."""
    return subprocess.run(
        command(args),
        env=env or child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,
    )
