"""Traces from every real mode convert to every format, load back with `datasets`, and
`tracegen stats` counts them as the traces themselves say."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from tests.support.episodes import FINAL, RIGHT, WRONG, Episodes, call, native_call
from tests.support.fake_ollama import Reply
from tracegen.cli import app
from tracegen.jsonl import JsonlWriter
from tracegen.schema import Trace

CODE = f"<code>\n{RIGHT}\n</code>"
SCRIPTS: dict[str, list[Reply | str]] = {
    "markers": [f"<think>Sum.</think>\n{CODE}\n<think>Check.</think>\n<verify>ok</verify>"],
    "forced-interleave": [
        "<think>Sum.</think>",
        CODE,
        "<think>Check.</think>",
        "<verify>ok</verify>",
    ],
    "tool-feedback": [
        f"<think>Wrong first.</think>\n<code>\n{WRONG}\n</code>",
        f"<think>Fix.</think>\n{CODE}",
    ],
    "interleaved-tools": [
        "<think>Start.</think>",
        "<code>\ndef add(a, b):\n</code>",
        "<think>Sum.</think>",
        "<code>\n    return a + b\n</code>",
    ],
    "inline-tools": [
        f"<think>Try.\n{call(RIGHT + chr(10) + 'print(add(1, 2))')}",
        f"3 is right.</think>{FINAL}",
    ],
    "structured": [f"<plan>Sum.</plan>\n{CODE}", "<reflection>Passes.</reflection>"],
    "native-tools": [
        native_call(RIGHT + "\nprint(add(1, 2))"),
        Reply(content=f"Done.\n```python\n{RIGHT}\n```"),
    ],
}
FORMATS = {
    "--chat-format": "messages",
    "--sharegpt": "conversations",
    "--training-format": "messages",
}


@pytest.fixture
async def trace_file(episodes: Episodes, tmp_path: Path) -> tuple[Path, list[Trace]]:
    traces = [await episodes.run(mode, *script) for mode, script in SCRIPTS.items()]
    traces.append(await episodes.run("markers", "<think>I give up"))
    path = tmp_path / "traces.jsonl"
    with JsonlWriter(path) as writer:
        for i, trace in enumerate(traces):
            trace = trace.model_copy(update={"id": f"t{i}"})
            traces[i] = trace
            writer.write(trace)
    return path, traces


@pytest.mark.parametrize("flag", list(FORMATS))
def test_every_mode_converts_and_loads_back(trace_file, tmp_path: Path, flag: str) -> None:
    path, traces = trace_file
    out, parquet, hf = tmp_path / "out.jsonl", tmp_path / "out.parquet", tmp_path / "hf"
    argv = [
        "convert",
        str(path),
        flag,
        "-o",
        str(out),
        "--parquet",
        str(parquet),
        "--to-hf",
        str(hf),
    ]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    convertible = [t for t in traces if t.error is None]
    for loaded in (
        datasets.load_dataset("json", data_files=str(out), split="train"),
        datasets.load_dataset("parquet", data_files=str(parquet), split="train"),
        datasets.load_from_disk(str(hf)),
    ):
        assert loaded["id"] == [t.id for t in convertible]
        assert loaded["success"] == [t.success for t in convertible]
        assert all(len(turns) >= 2 for turns in loaded[FORMATS[flag]])
    if flag == "--chat-format":
        roles = {row["mode"]: [m["role"] for m in row["messages"]] for row in loaded}
        assert "tool" in roles["native-tools"]
        assert roles["inline-tools"] == ["system", "user", "assistant"]


def test_stats_agree_with_the_traces(trace_file) -> None:
    path, traces = trace_file
    result = CliRunner().invoke(app, ["stats", str(path), "--json", "--by", "mode"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["traces"] == len(traces) == 8
    assert stats["success"] == sum(t.success for t in traces)
    assert stats["ideal"] == sum(t.is_ideal for t in traces)
    assert stats["failed_episodes"] == sum(t.error is not None for t in traces)
    strategies: Counter[str] = Counter()
    for t in traces:
        strategies.update(t.metrics.parse_strategies)
    assert stats["parse_strategies"] == dict(strategies) == {"strict": 1, "native": 1}
    assert stats["hallucinated_results"] == sum(t.metrics.hallucinated_results for t in traces)
    assert sorted(stats["by"]["groups"]) == sorted(SCRIPTS)
    tool_calls = sorted(t.metrics.tool_calls for t in traces)
    assert stats["distributions"]["tool_calls"]["max"] == tool_calls[-1]
