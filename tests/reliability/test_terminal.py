"""Nothing a model, a server or a problem file writes acts on the terminal: every command that
prints text tracegen did not write is run in a pseudo-terminal (and piped) with that text full
of escape sequences, C1 controls, DEL, bidirectional overrides and Rich markup, and the bytes
the terminal receives are checked: no escape sequence but tracegen's own colours, every hostile
character shown as a visible escape, markup shown as written."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.support.fake_ollama import FakeOllama, Fault
from tests.support.fake_openai import FakeOpenAI
from tests.support.hostile_text import HOSTILE, MARKUP, RAW
from tests.support.runs import child_env
from tests.support.scenarios import TRACEBACK, markers_reply, square_task, write_problems
from tests.support.traces import markers_trace, with_failing_tests, write_traces
from tracegen.schema import Step

pytestmark = pytest.mark.slow  # each case runs tracegen in a child process

_SGR = re.compile(rb"\x1b\[[0-9;]*m")


SHOWN = ("\\x1b]52;c;", "\\x9b", "\\u202e", "\\x7f")


def assert_safe(out: bytes, *, expect_visible: bool = True, shown: tuple[str, ...] = SHOWN) -> None:
    """``out`` holds no control or bidirectional character raw (tracegen's own colours, SGR
    sequences, aside), and the hostile ones are there as visible escapes."""
    bare = _SGR.sub(b"", out).replace(b"\r\n", b"\n")
    raw = sorted({m.group() for m in RAW.finditer(bare)})
    assert raw == [], f"raw bytes reached the terminal: {raw}"
    if expect_visible:
        text = bare.decode()
        for escape in shown:
            assert escape in text, f"{escape} not shown in:\n{text[:3000]}"


def in_pty(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, bytes]:
    """``tracegen ARGS`` with stdout and stderr a terminal; its exit status and every byte the
    terminal received."""
    leader, follower = pty.openpty()
    environment = {**(env or child_env()), "TERM": "xterm-256color", "COLUMNS": "200"}
    environment.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegen", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=environment,
    )
    os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        status = proc.wait(timeout=30)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return status, bytes(out)


def piped(args: list[str], env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``tracegen ARGS`` with stdout and stderr pipes; its exit status and both outputs."""
    done = subprocess.run(
        [sys.executable, "-m", "tracegen", *args],
        env=env or child_env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


BOTH = pytest.mark.parametrize("run", [in_pty, piped], ids=["pty", "pipe"])


@pytest.fixture
def hostile_traces(tmp_path: Path) -> Path:
    trace = with_failing_tests(markers_trace(0, problem_id=f"p-{HOSTILE}", passed=1), "failed")
    trace.model = f"m-{HOSTILE}"
    trace.messages[1].content = f"Write add.\n{HOSTILE}"
    trace.steps = [
        Step(kind="think", text=f"thinking {HOSTILE}", message_index=2),
        Step(kind="code", text=f"x = '{HOSTILE}'", message_index=2),
        Step(kind="verify", text=HOSTILE, message_index=2, parse_strategy=MARKUP),
    ]
    assert trace.verdict is not None
    trace.verdict.tests[0].name = f"t-{HOSTILE}"
    trace.verdict.tests[0].actual = HOSTILE
    return write_traces(tmp_path / "t.jsonl", [trace])


@BOTH
def test_show_prints_hostile_trace_text_as_visible_escapes(run, hostile_traces: Path) -> None:
    status, out = run(["show", str(hostile_traces), "--index", "0"])
    assert status == 0, out.decode(errors="replace")
    assert_safe(out)
    text = out.decode()
    assert MARKUP in _SGR.sub(b"", out).decode() and "MarkupError" not in text


@BOTH
@pytest.mark.parametrize("extra", [[], ["--by", "model"], ["--json"]], ids=["table", "by", "json"])
def test_stats_prints_hostile_ids_and_models_as_visible_escapes(
    run, hostile_traces: Path, extra: list[str]
) -> None:
    status, out = run(["stats", str(hostile_traces), *extra])
    assert status == 0, out.decode(errors="replace")
    if extra == ["--json"]:
        assert_safe(out, expect_visible=False)
        data = orjson.loads(_SGR.sub(b"", out))
        assert list(data["problems"]) == [f"p-{HOSTILE}"], "JSON escapes lose nothing"
    else:
        # cells are cut to the column: the start of the id is shown; markup read as markup
        # would be an OSC 8 link, or a MarkupError
        assert_safe(out, shown=("p-\\x1b]52;c;",))


@BOTH
@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_problems_lists_a_hostile_problem_file_safely(run, tmp_path: Path, json_out: bool) -> None:
    task = square_task(f"sq-{HOSTILE}")
    task["tests"][0]["name"] = f"t-{HOSTILE}"
    problems = write_problems(tmp_path / "tasks.jsonl", [task])
    status, out = run(["problems", str(problems), *(["--json"] if json_out else [])])
    assert status == 0, out.decode(errors="replace")
    # cells wrap at the column's width, cut with an ellipsis: the start of the id is shown
    assert_safe(out, expect_visible=not json_out, shown=("sq-\\x1b]52;c;",))
    if json_out:
        assert orjson.loads(out)["id"] == f"sq-{HOSTILE}"
    else:
        assert TRACEBACK not in out.decode() and "[/]" in _SGR.sub(b"", out).decode()


@BOTH
def test_verify_shows_an_exception_message_of_the_models_code_safely(run, tmp_path: Path) -> None:
    problems = write_problems(tmp_path / "tasks.jsonl", [square_task("sq")])
    code = f"def square(x):\n    raise ValueError({HOSTILE!r})\n"
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_bytes(orjson.dumps({"problem_id": "sq", "code": code}) + b"\n")
    status, out = run(["verify", str(solutions), "--problems", str(problems)])
    assert status == 0, out.decode(errors="replace")
    assert_safe(out, shown=("\\x7f", "\\u202e"))  # one line of the message, cut to fit


@BOTH
def test_a_servers_error_message_is_shown_safely_in_runs_lines(run, tmp_path: Path) -> None:
    problems = write_problems(tmp_path / "tasks.jsonl", [square_task("sq")])
    with FakeOllama() as server:
        server.set_responder(lambda path, body: markers_reply("def square(x):\n    return x*x\n"))
        for _ in range(3):
            server.fail_next(Fault("status", 400, message=f"bad\n{HOSTILE}\nforged line"))
        args = ["run", "--model", "test-model", "--host", server.url, "--mode", "markers"]
        args += ["--problems", str(problems), "-o", str(tmp_path / "out.jsonl"), "--limit", "1"]
        args += ["--quiet"]  # no live progress display, whose cursor moves are tracegen's own
        _, out = run(args)
    text = _SGR.sub(b"", out).decode()
    assert TRACEBACK not in text
    assert_safe(out)
    assert "\nforged line" not in text


def test_a_servers_long_error_message_is_clipped(tmp_path: Path) -> None:
    problems = write_problems(tmp_path / "tasks.jsonl", [square_task("sq")])
    with FakeOllama() as server:
        server.fail_next(Fault("status", 400, message="very long " * 100_000))
        args = ["run", "--model", "test-model", "--host", server.url, "--mode", "markers"]
        args += ["--problems", str(problems), "-o", str(tmp_path / "out.jsonl"), "--limit", "1"]
        status, out = piped([*args, "--quiet"])
    assert status == 1
    (line,) = out.decode().strip().splitlines()
    assert "very long very long" in line and len(line) < 600


@BOTH
def test_doctor_shows_a_servers_version_and_models_safely(run) -> None:
    models = {"test-model": ["completion"], f"m-{HOSTILE}": ["completion"]}
    with FakeOpenAI("llamacpp", version=HOSTILE, models=models) as server:
        status, out = run(["doctor", "--host", server.api, "--model", "absent"])
    assert status == 1, out.decode(errors="replace")
    text = _SGR.sub(b"", out).decode()
    assert TRACEBACK not in text and "MarkupError" not in text
    assert_safe(out, shown=("\\x1b]52;c;", "\\u202etxt.exe", "[bold red]R[/] [/]"))
    assert text.count("\\x1b]52;c;") == 2, "the version and the model's name"
