from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import datasets
import orjson
import pytest
from typer.testing import CliRunner

from tests.support.traces import (
    TRICKY,
    failed_trace,
    inline_tools_trace,
    markers_trace,
    native_tools_trace,
    tool_feedback_trace,
    write_traces,
)
from tracegen.cli import app
from tracegen.export.builder import ConvertOptions
from tracegen.export.formats import CHAT, SHAREGPT, TRAINING, escape_tags, unescape_tags
from tracegen.jsonl import iter_lines
from tracegen.schema import Trace

KEPT = ("id", "problem_id", "score", "success", "is_ideal")
FLAGS = {"chat": "--chat-format", "sharegpt": "--sharegpt", "training": "--training-format"}


def _convert(runner: CliRunner, *args: str | Path) -> str:
    result = runner.invoke(app, ["convert", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result.stderr


def _rows(path: Path) -> list[dict]:
    return [obj for _, obj in iter_lines(path)]


@pytest.mark.parametrize("fmt", ["chat", "sharegpt", "training"])
def test_every_mode_shape_converts_and_loads_back_with_datasets(
    runner: CliRunner, tmp_path: Path, trace_file: Path, traces: list[Trace], fmt: str
) -> None:
    out, pq, hf = tmp_path / "out.jsonl", tmp_path / "out.parquet", tmp_path / "hf"
    _convert(runner, trace_file, FLAGS[fmt], "-o", out, "--parquet", pq, "--to-hf", hf)

    expected = [t for t in traces if t.error is None]
    cache = str(tmp_path / "cache")
    loaded = {
        "jsonl": datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=cache),
        "parquet": datasets.load_dataset(
            "parquet", data_files=str(pq), split="train", cache_dir=cache
        ),
        "hf": datasets.load_from_disk(str(hf)),
    }
    column = "conversations" if fmt == "sharegpt" else "messages"
    for name, dataset in loaded.items():
        assert dataset.num_rows == len(expected), name
        for row, trace in zip(dataset, expected, strict=True):
            assert {k: row[k] for k in KEPT} == {k: getattr(trace, k) for k in KEPT}, name
            assert row[column], name
    assert loaded["parquet"].features == loaded["hf"].features


def test_chat_format_keeps_roles_and_tool_calls_as_json_strings() -> None:
    row = CHAT.row(native_tools_trace(), ConvertOptions("chat"))
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = row["messages"][2]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "python"
    assert orjson.loads(call["function"]["arguments"])["code"].startswith("def add")
    assert row["messages"][3]["name"] == "python"
    assert row["messages"][4]["content"].startswith("<think>\nIt works.\n</think>")


def test_reasoning_field_moves_thinking_out_of_the_text() -> None:
    row = CHAT.row(native_tools_trace(), ConvertOptions("chat", reasoning_field=True))
    last = row["messages"][4]
    assert last["reasoning_content"] == "It works."
    assert "<think>" not in last["content"]
    assert row["messages"][1]["reasoning_content"] is None


def test_sharegpt_uses_hermes_roles_and_tags() -> None:
    row = SHAREGPT.row(native_tools_trace(), ConvertOptions("sharegpt"))
    turns = row["conversations"]
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "gpt"]
    assert "<tool_call>\n" in turns[2]["value"]
    response = turns[3]["value"]
    assert response.startswith("<tool_response>\n") and response.endswith("\n</tool_response>")
    body = orjson.loads(response.removeprefix("<tool_response>").removesuffix("</tool_response>"))
    assert body == {"name": "python", "content": {"status": "ok", "stdout": "1\n"}}


def test_sharegpt_escapes_tags_inside_code_and_tool_output() -> None:
    row = SHAREGPT.row(inline_tools_trace(tricky=True), ConvertOptions("sharegpt"))
    value = row["conversations"][2]["value"]
    assert value.count("</tool_response>") == 1
    assert value.count("</code>") == 1
    assert value.count("</tool_call>") == 1
    code = value.split("<code>")[1].split("</code>")[0]
    assert unescape_tags(code) == TRICKY
    call = value.split("<tool_call>")[1].split("</tool_call>")[0]
    assert orjson.loads(call)["arguments"]["code"] == TRICKY
    response = value.split("<tool_response>")[1].split("</tool_response>")[0]
    assert orjson.loads(response)["stdout"] == "3\n</tool_response>"


@pytest.mark.parametrize(
    "text",
    ["a < b and a<b", "s = '</code>'", "&lt;/code> and &amp;lt;think>", "<think></think>", ""],
)
def test_tag_escaping_round_trips_and_leaves_comparisons_alone(text: str) -> None:
    escaped = escape_tags(text)
    assert unescape_tags(escaped) == text
    assert "</code>" not in escaped and "<think>" not in escaped
    if "<" in text and "/code" not in text and "think" not in text:
        assert escaped == text


def test_training_format_folds_the_trace_into_one_assistant_message() -> None:
    trace = tool_feedback_trace()
    messages = TRAINING.row(trace, ConvertOptions("training"))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["content"] == trace.messages[1].content
    folded = messages[1]["content"]
    order = ["<think>Subtract?", "<error>1/2", "<think>Wrong sign.", "<result>2/2", "<answer>"]
    positions = [folded.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert "&lt;/result>" in folded


def test_failed_episodes_and_filtered_traces_are_skipped_and_counted(
    runner: CliRunner, tmp_path: Path
) -> None:
    source = write_traces(
        tmp_path / "t.jsonl",
        [
            markers_trace(0),
            markers_trace(1, passed=1),
            markers_trace(2, ideal=False),
            failed_trace(3),
            failed_trace(4),
        ],
    )
    out = tmp_path / "ok.jsonl"
    stderr = _convert(runner, source, "--chat-format", "--only-success", "-o", out)
    assert [r["id"] for r in _rows(out)] == ["markers-0", "markers-2"]
    assert "converted 2 traces" in stderr
    assert "2 failed episodes" in stderr and "1 filtered by --only-success" in stderr

    _convert(runner, source, "--chat-format", "--only-ideal", "-o", out)
    assert [r["id"] for r in _rows(out)] == ["markers-0"]


def test_keep_logprobs_carries_tokens_pointing_at_output_messages() -> None:
    trace = native_tools_trace()
    chat = CHAT.row(trace, ConvertOptions("chat", keep_logprobs=True))
    assert [t["message_index"] for t in chat["logprobs"]] == [2, 4]
    assert chat["logprobs"][0]["tokens"][0]["token"] == "def"
    training = TRAINING.row(trace, ConvertOptions("training", keep_logprobs=True))
    assert {t["message_index"] for t in training["logprobs"]} == {1}
    assert "logprobs" not in CHAT.row(trace, ConvertOptions("chat"))


def test_default_output_is_beside_the_input_and_a_rerun_replaces_it(
    runner: CliRunner, trace_file: Path, traces: list[Trace]
) -> None:
    _convert(runner, trace_file, "--sharegpt")
    _convert(runner, trace_file, "--sharegpt")
    out = trace_file.with_name("traces.sharegpt.jsonl")
    assert len(_rows(out)) == sum(t.error is None for t in traces)


@pytest.mark.parametrize(
    "flags", [[], ["--chat-format", "--sharegpt"], ["--sharegpt", "--reasoning-field"]]
)
def test_format_flags_are_checked_with_a_one_line_error(
    runner: CliRunner, trace_file: Path, flags: list[str]
) -> None:
    result = runner.invoke(app, ["convert", str(trace_file), *flags])
    assert result.exit_code == 2
    assert result.stderr.startswith("tracegen: error: ")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["-o", "--parquet", "--to-hf"])
def test_malformed_line_names_file_and_line_and_leaves_no_output(
    runner: CliRunner, tmp_path: Path, flag: str
) -> None:
    source = write_traces(tmp_path / "t.jsonl", [markers_trace(0)])
    with source.open("ab") as fh:
        fh.write(b'{"schema": "tracegen.trace/1", "id": 1}\n')
    out = tmp_path / "out"
    result = runner.invoke(app, ["convert", str(source), "--chat-format", flag, str(out)])
    assert result.exit_code == 2
    assert f"{source}:2:" in result.stderr
    assert list(tmp_path.iterdir()) == [source]


def test_chat_jsonl_keeps_one_column_type_across_reading_blocks(tmp_path: Path) -> None:
    traces = [native_tools_trace(0)] + [markers_trace(i) for i in range(1, 40)]
    traces.append(native_tools_trace(40))
    source = write_traces(tmp_path / "t.jsonl", traces)
    out = tmp_path / "chat.jsonl"
    assert (
        CliRunner().invoke(app, ["convert", str(source), "--chat-format", "-o", str(out)]).exit_code
        == 0
    )
    dataset = datasets.load_dataset(
        "json", data_files=str(out), split="train", chunksize=4096, cache_dir=str(tmp_path / "c")
    )
    assert dataset.num_rows == len(traces)
    last = dataset[len(traces) - 1]["messages"][2]["tool_calls"][0]
    assert orjson.loads(last["function"]["arguments"])["code"].startswith("def add")


def test_an_unrelated_directory_is_never_replaced(runner: CliRunner, trace_file: Path) -> None:
    keep = trace_file.parent / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    result = runner.invoke(app, ["convert", str(trace_file), "--chat-format", "--to-hf", str(keep)])
    assert result.exit_code == 2
    assert "not a dataset tracegen wrote" in result.stderr
    assert (keep / "notes.txt").read_text() == "precious"
    (keep / "dataset_info.json").write_text("{}")  # a dataset, but not one tracegen wrote
    result = runner.invoke(app, ["convert", str(trace_file), "--chat-format", "--to-hf", str(keep)])
    assert result.exit_code == 2 and "not a dataset tracegen wrote" in result.stderr
    assert sorted(p.name for p in keep.iterdir()) == ["dataset_info.json", "notes.txt"]
    hf = trace_file.parent / "hf"
    for _ in range(2):
        _convert(runner, trace_file, "--chat-format", "--to-hf", hf)
    assert datasets.load_from_disk(str(hf)).num_rows > 0


def test_a_dataset_folder_tracegen_wrote_is_replaced_only_while_it_holds_only_its_files(
    runner: CliRunner, trace_file: Path
) -> None:
    hf = trace_file.parent / "hf"
    _convert(runner, trace_file, "--chat-format", "--to-hf", hf)
    written = sorted(p.name for p in hf.iterdir())
    assert ".tracegen-dataset.json" in written and "README.md" in written
    (hf / "my-notes.md").write_text("precious")
    result = runner.invoke(app, ["convert", str(trace_file), "--chat-format", "--to-hf", str(hf)])
    assert result.exit_code == 2
    assert "holds my-notes.md, which tracegen did not write" in result.stderr
    assert (hf / "my-notes.md").read_text() == "precious"
    (hf / "my-notes.md").unlink()
    _convert(runner, trace_file, "--sharegpt", "--to-hf", hf)
    assert sorted(p.name for p in hf.iterdir()) == written


def test_logprobs_are_only_read_when_kept(runner: CliRunner, tmp_path: Path) -> None:
    row = native_tools_trace().to_json()
    row["logprobs"][0]["tokens"][0]["logprob"] = "not a number"
    source = tmp_path / "t.jsonl"
    source.write_bytes(orjson.dumps(row) + b"\n")
    out = tmp_path / "out.jsonl"
    _convert(runner, source, "--chat-format", "-o", out)
    assert [r["id"] for r in _rows(out)] == [row["id"]]
    result = runner.invoke(
        app, ["convert", str(source), "--chat-format", "--keep-logprobs", "-o", str(out)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"tracegen: error: {source}:1: not a valid Trace: logprobs.")


@pytest.mark.parametrize(
    ("flag", "numpy"), [("--chat-format", False), ("--rl trl --require-exact", True)]
)
def test_numpy_is_imported_only_by_the_token_formats(
    trace_file: Path, tmp_path: Path, flag: str, numpy: bool
) -> None:
    """A text format to JSONL stays light (docs/performance.md); a token format
    brings numpy, which it uses."""
    argv = ["tracegen", "convert", str(trace_file), *flag.split(), "-o", str(tmp_path / "o")]
    code = (
        "import runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    runpy.run_module('tracegen', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == str(numpy)
