from __future__ import annotations

import gzip
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import orjson
import pytest
from typer.testing import CliRunner

from tests.support.traces import all_shapes, markers_trace, write_traces
from tracegen.cli import app
from tracegen.errors import JsonlError
from tracegen.jsonl import line_spans
from tracegen.schema import Trace
from tracegen.views import stats as stats_module
from tracegen.views.stats import collect


def _stats(runner: CliRunner, *args: str | Path) -> dict:
    result = runner.invoke(app, ["stats", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def _value(trace: Trace, name: str) -> float:
    return trace.score if name == "score" else getattr(trace.metrics, name)


def test_stats_numbers_match_counts_computed_from_the_traces(
    runner: CliRunner, trace_file: Path, traces: list[Trace]
) -> None:
    data = _stats(runner, trace_file)
    n = len(traces)
    assert data["traces"] == n and data["malformed_lines"] == 0
    assert data["success"] == sum(t.success for t in traces)
    assert data["ideal"] == sum(t.is_ideal for t in traces)
    assert data["success_rate"] == pytest.approx(data["success"] / n)
    failed = [t for t in traces if t.error]
    assert data["failed_episodes"] == len(failed)
    assert data["failed_by_reason"] == dict(
        Counter(f"{t.error.kind}/{t.error.reason}" for t in failed if t.error)
    )
    for name, d in data["distributions"].items():
        values = [_value(t, name) for t in traces]
        assert d["n"] == n
        assert d["mean"] == pytest.approx(statistics.fmean(values)), name
        assert d["median"] == pytest.approx(statistics.median(values)), name
        p90 = statistics.quantiles(values, n=10, method="inclusive")[-1]
        assert d["p90"] == pytest.approx(p90), name
        assert (d["min"], d["max"]) == (min(values), max(values))
    assert data["parse_failures"] == sum(t.metrics.parse_failures for t in traces)
    strategies: Counter[str] = Counter()
    for t in traces:
        strategies.update(t.metrics.parse_strategies)
    assert data["parse_strategies"] == dict(strategies)
    assert data["hallucinated_results"] == sum(t.metrics.hallucinated_results for t in traces)
    statuses = Counter(t.logprobs_status for t in traces)
    assert {k: data["logprobs"][k] for k in statuses} == dict(statuses)
    assert data["logprobs"]["turns_with_logprobs"] == sum(len(t.logprobs) for t in traces)
    for pid, row in data["problems"].items():
        mine = [t for t in traces if t.problem_id == pid]
        assert row["traces"] == len(mine)
        assert row["success"] == sum(t.success for t in mine)
    assert set(data["problems"]) == {t.problem_id for t in traces}


def test_by_mode_breaks_every_count_down(
    runner: CliRunner, trace_file: Path, traces: list[Trace]
) -> None:
    groups = _stats(runner, trace_file, "--by", "mode")["by"]["groups"]
    assert set(groups) == {t.mode for t in traces}
    for mode, g in groups.items():
        mine = [t for t in traces if t.mode == mode]
        assert g["traces"] == len(mine)
        assert g["success"] == sum(t.success for t in mine)
        assert g["failed_episodes"] == sum(t.error is not None for t in mine)
        turns = statistics.fmean(t.metrics.turns for t in mine)
        assert g["mean"]["turns"] == pytest.approx(turns)


def test_unknown_by_key_is_a_one_line_error(runner: CliRunner, trace_file: Path) -> None:
    result = runner.invoke(app, ["stats", str(trace_file), "--by", "colour"])
    assert result.exit_code == 2
    assert "--by" in result.stderr and len(result.stderr.splitlines()) == 1


def test_malformed_lines_are_reported_with_file_and_line_and_counted(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = write_traces(tmp_path / "t.jsonl", [markers_trace(0)])
    with path.open("ab") as fh:
        fh.write(b'{"cut in the mid\n')
        fh.write(b'{"schema": "tracegen.trace/2", "id": "x"}\n')
        fh.write(b'{"schema": "tracegen.trace/1", "id": "y", "mode": "m", "model": "m"}\n')
        bad_metrics = markers_trace(1).to_json()
        bad_metrics["metrics"]["turns"] = "three"
        fh.write(orjson.dumps(bad_metrics) + b"\n")
        fh.write(b"[1, 2]\n")
    result = runner.invoke(app, ["stats", str(path), "--json"])
    assert result.exit_code == 0
    data = orjson.loads(result.stdout)
    assert data["traces"] == 1 and data["malformed_lines"] == 5 and data["lines"] == 6
    for line in range(2, 7):
        assert f"{path}:{line}:" in result.stderr
    assert "problem_id" in result.stderr and "metrics.turns" in result.stderr


def test_strict_makes_a_malformed_line_fatal(runner: CliRunner, tmp_path: Path) -> None:
    path = write_traces(tmp_path / "t.jsonl", [markers_trace(0)])
    with path.open("ab") as fh:
        fh.write(b"not json\n")
    result = runner.invoke(app, ["stats", str(path), "--strict"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert f"{path}:2:" in result.stderr


def test_missing_file_is_one_line_naming_it(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = runner.invoke(app, ["stats", str(missing)])
    assert result.exit_code == 2
    assert result.stderr == f"tracegen: error: {missing}: no such file\n"


def test_globs_are_expanded_by_tracegen(runner: CliRunner, tmp_path: Path) -> None:
    write_traces(tmp_path / "a.jsonl", all_shapes())
    write_traces(tmp_path / "b.jsonl", all_shapes())
    data = _stats(runner, tmp_path / "*.jsonl", tmp_path / "a.jsonl")
    assert data["files"] == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert data["traces"] == 2 * len(all_shapes())
    result = runner.invoke(app, ["stats", str(tmp_path / "*.gz")])
    assert result.exit_code == 2 and "no file matches" in result.stderr


def test_tables_show_the_rates_and_problems(runner: CliRunner, trace_file: Path) -> None:
    result = runner.invoke(app, ["stats", str(trace_file), "--by", "model"])
    assert result.exit_code == 0
    out = result.stdout
    assert "\x1b[" not in out
    for text in ("success", "60.0%", "p90", "histogram", "sub", "qwen3:8b", "backend/timeout"):
        assert text in out


def test_empty_file_is_refused_in_one_line(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    result = runner.invoke(app, ["stats", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"tracegen: error: {path}: holds no traces"


def test_no_valid_trace_means_no_rates(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(b"not json\n")
    data = _stats(runner, path)
    assert data["traces"] == 0 and data["malformed_lines"] == 1
    assert data["success_rate"] is None
    assert data["distributions"]["score"]["median"] is None


def _line(trace: Trace, **metrics: object) -> bytes:
    row = trace.to_json()
    row["metrics"].update(metrics)
    return orjson.dumps(row).replace(b'"@', b"").replace(b'@"', b"") + b"\n"


BAD_NUMBERS = {
    "NaN": {"latency_s": "@NaN@"},
    "Infinity": {"latency_s": "@Infinity@"},
    "a float beyond double": {"latency_s": "@1e400@"},
    "an integer beyond 64 bits": {"turns": "@18446744073709551616@"},
    "a huge integer": {"completion_tokens": "@" + "9" * 40 + "@"},
    "a negative count": {"code_blocks": -1},
}


@pytest.mark.parametrize("metrics", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_stats_of_a_file_with_nan_or_huge_counts_is_one_line(
    tmp_path: Path, metrics: dict[str, object]
) -> None:
    path = write_traces(tmp_path / "t.jsonl", [markers_trace(0)])
    with path.open("ab") as fh:
        fh.write(_line(markers_trace(1), **metrics))
    tracegen = [sys.executable, "-m", "tracegen", "stats", str(path)]
    done = subprocess.run([*tracegen, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    data = orjson.loads(done.stdout)
    assert (data["traces"], data["malformed_lines"]) == (1, 1)
    assert done.stderr.startswith(f"tracegen: warning: {path}:2: ")
    assert len(done.stderr.splitlines()) == 1

    done = subprocess.run([*tracegen, "--strict"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"tracegen: error: {path}:2: ")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_counts_that_add_up_past_64_bits_still_print(runner: CliRunner, tmp_path: Path) -> None:
    big = 2**63 - 1
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_line(markers_trace(i), parse_failures=big) for i in range(3)))
    result = runner.invoke(app, ["stats", str(path), "--json"])
    assert msgspec.json.decode(result.stdout)["parse_failures"] == 3 * big
    result = runner.invoke(app, ["stats", str(path)])
    assert result.exit_code == 0, result.output


def test_a_large_file_counts_the_same_on_one_process_and_on_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stats_module, "SPAN_BYTES", 20_000)
    path = write_traces(tmp_path / "t.jsonl", all_shapes(copies=12))
    with path.open("ab") as fh:
        fh.write(b"not json\n")
    path.write_bytes(path.read_bytes() * 3)
    assert len(line_spans(path, stats_module.SPAN_BYTES)) > 4
    results = []
    for workers in (1, 2):
        stats = collect([path], by="mode", workers=workers)
        results.append((stats.to_json(), stats.distributions, capsys.readouterr().err))
    assert results[0] == results[1]
    lines = path.read_bytes().splitlines()
    bad = [n for n, line in enumerate(lines, 1) if line == b"not json"]
    warned = [line.split(": not valid JSON")[0] for line in results[0][2].splitlines()]
    assert warned == [f"tracegen: warning: {path}:{n}" for n in bad]
    assert results[0][0]["traces"] == len(lines) - len(bad)


def test_strict_stops_at_the_first_bad_line_of_a_large_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stats_module, "SPAN_BYTES", 20_000)
    traces = all_shapes(copies=12)
    path = write_traces(tmp_path / "t.jsonl", traces)
    with path.open("ab") as fh:
        fh.write(b"[1, 2]\n")
        fh.write(b"not json\n")
    with pytest.raises(JsonlError, match=rf"^{path}:{len(traces) + 1}: expected a JSON object"):
        collect([path], strict=True, workers=2)


def test_stats_json_reads_without_pydantic_or_rich(trace_file: Path) -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['tracegen', 'stats', {str(trace_file)!r}, '--json']\n"
        "try:\n"
        "    runpy.run_module('tracegen', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print([m for m in ('pydantic', 'rich') if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert orjson.loads(done.stdout)["traces"] > 0
    assert done.stderr.strip() == "[]"


def test_a_gzipped_file_counts_like_the_plain_one(runner: CliRunner, trace_file: Path) -> None:
    packed = trace_file.with_name("traces.jsonl.gz")
    packed.write_bytes(gzip.compress(trace_file.read_bytes()))
    plain, gzipped = _stats(runner, trace_file), _stats(runner, packed)
    assert gzipped.pop("files") == [str(packed)] and plain.pop("files") == [str(trace_file)]
    assert gzipped == plain


def _varied_lines() -> list[bytes]:
    """Trace lines of every shape, failure and program verdict, some without metrics."""
    from tests.support.traces import every_mode_and_failure, night_of_traces

    rows = [t.to_json() for t in all_shapes(copies=3) + every_mode_and_failure()]
    rows += [t.to_json() for t in night_of_traces(300)]
    for i, row in enumerate(rows):
        if i % 7 == 0:
            outcomes = ("accepted", "wrong", "time", "error")
            row["verdict"] = {
                "outcome": outcomes[i % 4],
                "tests": [{"outcome": outcomes[(i + k) % 4]} for k in range(i % 5)],
            }
        if i % 11 == 0:
            row["metrics"] = None
    return [orjson.dumps(row) for row in rows]


@pytest.mark.parametrize("by", [None, "mode", "model", "problem"])
def test_counting_blocks_by_columns_counts_what_each_trace_counted_alone_does(
    tmp_path: Path, by: str | None
) -> None:
    lines = _varied_lines()
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    counted = collect([path], by=by, workers=1)
    alone = stats_module.Stats(by=by, files=[str(path)])
    for line in lines:
        alone.add(stats_module.DECODER.decode(line))
    assert counted.to_json() == alone.to_json()
    assert counted.distributions == alone.distributions
    assert counted.to_json()["outcomes"] and counted.to_json()["failed_by_reason"]


def test_a_bad_line_among_blocks_of_good_ones_is_named_by_its_line_and_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Blocks of lines are decoded in one call; one holding a bad line is read again line
    by line, and the bad line is named by its number in the file (blank lines count)."""
    from tracegen import jsonl

    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 8_000)
    good = [orjson.dumps(t.to_json()) for t in all_shapes(copies=4)]
    bad_turns = markers_trace(1).to_json()
    bad_turns["metrics"]["turns"] = "three"
    lines = [*good[:9], b"", *good[9:20], b'{"schema": "tracegen.trace/1", "id": "cut', *good[20:]]
    lines.insert(30, orjson.dumps(bad_turns))
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    stats = collect([path], workers=1)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"tracegen: warning: {path}:22: not valid JSON (Input data was truncated)",
        f"tracegen: warning: {path}:31: not a tracegen.trace/1 record: metrics.turns: "
        "expected `int`, got `str`",
    ]
    assert stats.total.traces == len(good) and stats.malformed == 2
    assert stats.to_json()["lines"] == len(lines) - 1  # the blank line is no trace


def test_fields_stats_does_not_know_are_skipped_and_change_no_count(tmp_path: Path) -> None:
    """A line may carry fields this version does not know (written by a later one, or by
    another tool), at the top or nested: each is skipped, whatever its JSON."""
    plain = [t.to_json() for t in all_shapes(copies=2)]
    extended = []
    for i, row in enumerate(orjson.loads(orjson.dumps(plain))):
        row["z_later"] = {"nested": [1, 2.5, None, {"deep": ["é", True]}], "n": 10**30}
        row["a_first"] = "x" * i
        row["metrics"] = {"unknown_counter": -3, **row["metrics"]}
        for message in row["messages"]:
            message["extra"] = [{"role": "assistant"}]
        if row["verdict"] is not None:
            row["verdict"]["unknown"] = {"outcome": "accepted"}
        extended.append(dict(reversed(list(row.items()))))  # the fields in another order
    a, b = tmp_path / "plain.jsonl", tmp_path / "extended.jsonl"
    a.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in plain))
    b.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in extended))
    for by in (None, "mode"):
        counted, expected = collect([b], by=by).to_json(), collect([a], by=by).to_json()
        assert counted["malformed_lines"] == 0
        assert {**counted, "files": []} == {**expected, "files": []}


def test_unicode_ids_and_reasons_are_counted_and_printed_as_they_are(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Names written raw (UTF-8) and as JSON escapes are the same names."""
    rows = []
    for i, (pid, model) in enumerate([("prob-é", "qwen-中文"), ("prob-\U0001f600", "qwen-中文")]):
        row = markers_trace(i).to_json()
        row["problem_id"], row["model"] = pid, model
        rows.append(orjson.dumps(row))
    escaped = markers_trace(2).to_json()
    escaped["problem_id"], escaped["model"] = "prob-é", "qwen-中文"
    rows.append(json_ascii(escaped))
    assert b"\\u00e9" in rows[-1] and b"\\u4e2d" in rows[-1]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    data = _stats(runner, path, "--by", "model")
    assert data["traces"] == 3 and data["malformed_lines"] == 0
    assert {pid: p["traces"] for pid, p in data["problems"].items()} == {
        "prob-é": 2,
        "prob-\U0001f600": 1,
    }
    assert list(data["by"]["groups"]) == ["qwen-中文"]
    table = runner.invoke(app, ["stats", str(path)])
    assert table.exit_code == 0 and "prob-é" in table.stdout


def json_ascii(row: dict) -> bytes:
    import json

    return json.dumps(row, ensure_ascii=True).encode()
