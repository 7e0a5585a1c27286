"""RL and token exports keep failed episodes (with reward and error) and warn about the
Atropos groups a trainer learns nothing from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback
from tests.support.traces import write_traces
from tracegen.cli import app
from tracegen.schema import ChatMessage, Trace, TraceError

Row = dict[str, Any]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ChatmlModel:
    return ChatmlModel(make_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer"))


def failed(trace: Trace, kind: str, reason: str) -> Trace:
    """``trace`` as an episode that ended in an error (reward -1, as `rescore` gives)."""
    error = TraceError(kind=kind, reason=reason, message=f"{reason} reached")  # type: ignore[arg-type]
    return trace.model_copy(update={"error": error, "success": False, "reward": -1.0})


def server_failed(trace: Trace) -> Trace:
    """``trace`` as an episode whose first request failed: the model wrote nothing."""
    return failed(trace, "backend", "unavailable").model_copy(
        update={"messages": trace.messages[:2], "steps": [], "token_requests": [], "logprobs": []}
    )


def convert(trace_file: Path, *args: str | Path) -> Result:
    """``tracegen convert`` in process (its exit code, its stderr)."""
    runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": None, "FORCE_COLOR": None})
    return runner.invoke(app, ["convert", str(trace_file), *map(str, args)])


def rows_of(path: Path) -> list[Row]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_file_of_only_failed_episodes_converts_with_reward_and_error(
    model: ChatmlModel, tmp_path: Path
) -> None:
    traces = [
        failed(tool_feedback(model, 0), "limit", "max_iterations"),
        failed(inline_tools(model, 1), "limit", "max_tokens"),
        failed(tool_feedback(model, 2), "limit", "max_iterations"),
    ]
    trace_file = write_traces(tmp_path / "t.jsonl", traces)
    for flags, name in ((["--rl", "trl"], "rl-trl"), (["--tokenized"], "tokenized")):
        result = convert(trace_file, *flags)
        assert result.exit_code == 0, result.stderr
        rows = rows_of(tmp_path / f"t.{name}.jsonl")
        assert [r["id"] for r in rows] == [t.id for t in traces]
        for row, trace in zip(rows, traces, strict=True):
            assert row["reward"] == -1.0 and row["success"] is False
            error = trace.error
            assert error is not None
            assert (row["error_kind"], row["error_reason"]) == (error.kind, error.reason)
        assert "3 of them failed episodes (limit/max_iterations 2, limit/max_tokens 1)" in (
            result.stderr
        )
        assert "converted 3 traces" in result.stderr
        assert "3 of them from unsuccessful episodes" in result.stderr
    result = convert(trace_file, "--rl", "atropos")
    assert result.exit_code == 0, result.stderr
    (group,) = rows_of(tmp_path / "t.rl-atropos.jsonl")
    assert group["scores"] == [-1.0] * 3 and group["successes"] == [False] * 3
    assert group["errors"] == ["limit/max_iterations", "limit/max_tokens", "limit/max_iterations"]


def test_only_success_keeps_todays_behaviour(model: ChatmlModel, tmp_path: Path) -> None:
    ok = tool_feedback(model, 0)
    traces = [ok, failed(tool_feedback(model, 1), "limit", "max_iterations")]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl", "--only-success")
    assert result.exit_code == 0, result.stderr
    (row,) = rows_of(tmp_path / "t.rl-trl.jsonl")
    assert row["id"] == ok.id and row["error_kind"] is None and row["error_reason"] is None
    assert "skipped 1 failed episodes" in result.stderr


def test_episodes_without_a_model_token_or_failed_by_the_server_are_skipped_and_counted(
    model: ChatmlModel, tmp_path: Path
) -> None:
    kept = failed(tool_feedback(model, 0), "parse", "tool_call")
    traces = [
        kept,
        server_failed(tool_feedback(model, 1)),
        failed(tool_feedback(model, 2), "backend", "timeout"),
    ]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    assert [r["id"] for r in rows_of(tmp_path / "t.rl-trl.jsonl")] == [kept.id]
    assert "1 of them failed episodes (parse/tool_call 1)" in result.stderr
    assert "2 episodes failed by the server or tracegen" in result.stderr
    assert "backend/unavailable 1, backend/timeout 1" in result.stderr


def test_a_failed_episode_the_model_wrote_nothing_of_is_counted_as_such(
    model: ChatmlModel, tmp_path: Path
) -> None:
    nothing = failed(tool_feedback(model, 1), "limit", "max_tokens")
    nothing = nothing.model_copy(
        update={"messages": [*nothing.messages[:2]], "token_requests": [], "logprobs": []}
    )
    nothing.messages.append(ChatMessage(role="user", content="again"))
    traces = [tool_feedback(model, 0), nothing]
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl")
    assert result.exit_code == 0, result.stderr
    assert "1 failed episodes without a model token" in result.stderr


def test_atropos_warns_once_about_groups_it_would_skip_and_can_drop_them(
    model: ChatmlModel, tmp_path: Path
) -> None:
    traces = [
        inline_tools(model, 0, problem_id="alone"),
        tool_feedback(model, 1, problem_id="same"),
        tool_feedback(model, 2, problem_id="same"),
        inline_tools(model, 3, problem_id="mixed"),
        inline_tools(model, 4, problem_id="mixed"),
    ]
    trace_file = write_traces(tmp_path / "t.jsonl", traces)
    result = convert(trace_file, "--rl", "atropos")
    assert result.exit_code == 0, result.stderr
    assert len(rows_of(tmp_path / "t.rl-atropos.jsonl")) == 3
    warnings = [line for line in result.stderr.splitlines() if "groups (" in line]
    assert len(warnings) == 1
    assert "1 of one sample and 1 more with all-equal scores among 3 groups (kept)" in warnings[0]

    result = convert(trace_file, "--rl", "atropos", "--min-group-size", "2")
    assert result.exit_code == 0, result.stderr
    groups = rows_of(tmp_path / "t.rl-atropos.jsonl")
    assert [g["problem_id"] for g in groups] == ["same", "mixed"]
    assert "dropped 1 groups" in result.stderr

    result = convert(trace_file, "--rl", "atropos", "--min-group-size", "2", "--drop-equal-scores")
    assert [g["problem_id"] for g in rows_of(tmp_path / "t.rl-atropos.jsonl")] == ["mixed"]
    assert "2 groups of 2 records" not in result.stderr and "1 groups of 2 records" in result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rl", "trl", "--min-group-size", "2"], "--min-group-size applies to --rl only"),
        (["--rl", "atropos", "--min-group-size", "0"], "--min-group-size 0: must be at least 1"),
        (["--tokenized", "--drop-equal-scores"], "--drop-equal-scores applies to --rl only"),
    ],
)
def test_group_flags_misused_are_one_line(
    flags: list[str], message: str, model: ChatmlModel, tmp_path: Path
) -> None:
    result = convert(write_traces(tmp_path / "t.jsonl", [tool_feedback(model)]), *flags)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_dataset_card_says_which_failed_episodes_were_kept(
    model: ChatmlModel, tmp_path: Path
) -> None:
    traces = [
        failed(tool_feedback(model, 0), "limit", "max_iterations"),
        tool_feedback(model, 1),
        server_failed(tool_feedback(model, 2)),
    ]
    hf = tmp_path / "hf"
    result = convert(write_traces(tmp_path / "t.jsonl", traces), "--rl", "trl", "--to-hf", hf)
    assert result.exit_code == 0, result.stderr
    card = (hf / "README.md").read_text()
    assert "- failed episodes kept, with their reward and error: `limit/max_iterations` (1)" in card
    assert "- episodes failed by the server or tracegen skipped: `backend/unavailable` (1)" in card
    assert "`error_kind`" in card
