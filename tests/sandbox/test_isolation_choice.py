"""Which isolation a user gets and how they are told: doctor, the run's first line, refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tests.support.fake_ollama import FakeOllama
from tests.support.runs import tracegen
from tests.support.scenarios import markers_reply, run_args
from tracegen.cli import app
from tracegen.sandbox import isolation

CLEAN_ENV = {"OLLAMA_API_KEY": "", "OLLAMA_HOST": "", "COLUMNS": "250"}
NOTHING = isolation.BuiltinLayers(
    problems=["no user+network namespace (unshare: Operation not permitted)", "no Landlock"]
)


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    isolation._bwrap_problem.cache_clear()
    yield
    isolation._bwrap_problem.cache_clear()


@pytest.fixture
def no_isolation(no_bubblewrap: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "builtin_layers", lambda: NOTHING)


def square_solutions(tmp_path: Path) -> Path:
    path = tmp_path / "solutions.jsonl"
    row = {"problem_id": "reverse_string", "code": "def reverse_string(s):\n    return s[::-1]\n"}
    path.write_bytes(orjson.dumps(row) + b"\n")
    return path


def test_doctor_names_the_layers_of_the_builtin_isolation(
    no_bubblewrap: None, fake_ollama: FakeOllama
) -> None:
    result = CliRunner().invoke(
        app, ["doctor", "--host", fake_ollama.url, "--model", "test-model"], env=CLEAN_ENV
    )
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "sandbox" in line)
    assert "builtin:" in row and "(no network)" in row and "landlock ABI" in row


def test_doctor_says_what_is_not_installed(no_bubblewrap: None, fake_ollama: FakeOllama) -> None:
    """Without bubblewrap and g++ (neither on PATH): the sandbox row says bubblewrap is not
    used and why, a warning row says C++ solutions cannot be judged; still ready (exit 0)."""
    result = CliRunner().invoke(
        app, ["doctor", "--host", fake_ollama.url, "--model", "test-model"], env=CLEAN_ENV
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "bubblewrap not used: bubblewrap (bwrap) is not installed" in out
    assert "g++ is not installed: C++ solutions are judged `error`" in out
    assert "apt-get install g++" in out and "ready" in out


def test_verify_refuses_to_run_code_without_any_isolation(
    no_isolation: None, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, ["verify", str(square_solutions(tmp_path))], env=CLEAN_ENV)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no isolation for generated code here" in line
    assert "apt-get install bubblewrap" in line and "--sandbox rlimit" in line


def test_verify_runs_with_rlimits_only_when_asked_for(no_isolation: None, tmp_path: Path) -> None:
    solutions = square_solutions(tmp_path)
    result = CliRunner().invoke(app, ["verify", str(solutions), "--sandbox", "rlimit"])
    assert result.exit_code == 0, result.output
    assert "1 solutions: 1 passed" in result.output


def test_doctor_fails_the_sandbox_row_without_any_isolation(
    no_isolation: None, fake_ollama: FakeOllama
) -> None:
    result = CliRunner().invoke(
        app, ["doctor", "--host", fake_ollama.url, "--model", "test-model"], env=CLEAN_ENV
    )
    assert result.exit_code == 1
    assert "no isolation for generated code here" in result.output


@pytest.mark.slow
def test_run_names_the_isolation_layers_in_its_first_line(tmp_path: Path) -> None:
    answer = markers_reply("def reverse_string(s):\n    return s[::-1]\n")
    out = tmp_path / "traces.jsonl"
    with FakeOllama() as server:
        server.set_responder(lambda path, body: answer)
        args = run_args(server.url, out, "--problem-ids", "reverse_string", "--sandbox", "builtin")
        done = tracegen(args)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "sandbox builtin: " in output and "landlock ABI" in output, output


def test_the_sandbox_interpreter_gets_its_modules_compiled_on_stdin_not_in_argv() -> None:
    """The interpreter keeps wide-character copies of its arguments: sources there cost
    every fork of the zygote megabytes of page tables to copy and tear down."""
    import marshal

    from tracegen.sandbox.isolation import SOURCES, sandbox_command

    command = sandbox_command("tracegen.sandbox._zygote.main", config={})
    assert sum(len(arg) for arg in command.argv) < 4096
    modules = marshal.loads(command.modules)
    assert [name for name, _ in modules] == [f"tracegen.sandbox.{s}" for s in SOURCES]
