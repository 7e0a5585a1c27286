from __future__ import annotations

from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from tests.support.traces import inline_tools_trace, markers_trace, write_traces
from tracegen.cli import app
from tracegen.views.show import render_trace


def _show(runner: CliRunner, *args: str | Path) -> str:
    result = runner.invoke(app, ["show", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_show_prints_plain_steps_tests_and_metrics_when_piped(
    runner: CliRunner, trace_file: Path
) -> None:
    out = _show(runner, trace_file, "--id", "inline-6")
    assert "\x1b[" not in out
    for text in ("inline-6", "tool_call", "tool_response · system", "return a + b"):
        assert text in out
    assert "Tests: 2/2 passed" in out and "completion_tokens" in out


def test_show_picks_by_index_and_among_failures(runner: CliRunner, trace_file: Path) -> None:
    assert "markers-1" in _show(runner, trace_file, "--index", "1")
    assert "markers-0" in _show(runner, trace_file)
    failed = _show(runner, trace_file, "--only-failed", "--index", "0")
    assert "markers-1" in failed and "failed" in failed
    episode = _show(runner, trace_file, "--id", "failed-8")
    assert "episode failed" in episode and "backend/timeout" in episode


def test_model_text_is_shown_as_written_not_as_markup(runner: CliRunner, tmp_path: Path) -> None:
    trace = markers_trace(0)
    trace.steps[0].text = "check [bold]x[/bold] and [red]"
    out = _show(runner, write_traces(tmp_path / "t.jsonl", [trace]))
    assert "check [bold]x[/bold] and [red]" in out


def test_show_colours_steps_on_a_terminal() -> None:
    console = Console(force_terminal=True, color_system="standard", width=100)
    with console.capture() as capture:
        console.print(render_trace(inline_tools_trace()))
    assert "\x1b[" in capture.get()


def test_a_missing_trace_is_a_one_line_error(runner: CliRunner, trace_file: Path) -> None:
    for args in (["--index", "99"], ["--id", "nope"], ["--index", "0", "--id", "x"]):
        result = runner.invoke(app, ["show", str(trace_file), *args])
        assert result.exit_code == 2, args
        assert len(result.stderr.strip().splitlines()) == 1
