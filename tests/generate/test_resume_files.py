"""The run's files: what counts as attempted after a crash, and when a file is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegen.config import GenerationSettings
from tracegen.errors import ConfigError
from tracegen.generate.runfiles import RunFiles, state_path
from tracegen.jsonl import iter_lines
from tracegen.schema import Trace

SETTINGS = GenerationSettings(mode="markers", model="m")
HASH = SETTINGS.digest("prompt")


def trace(problem: str, sample: int = 0, settings_hash: str = HASH) -> Trace:
    return Trace(
        id=f"{problem}-{sample}",
        problem_id=problem,
        sample=sample,
        mode="markers",
        model="m",
        settings_hash=settings_hash,
    )


def open_files(
    out: Path,
    rejects: Path | None = None,
    *,
    settings: GenerationSettings = SETTINGS,
    overwrite: bool = False,
    warnings: list[str] | None = None,
) -> RunFiles:
    return RunFiles(
        out,
        rejects,
        settings_hash=settings.digest("prompt"),
        settings=settings.record("prompt"),
        overwrite=overwrite,
        warn=(warnings if warnings is not None else []).append,
    )


def test_every_outcome_is_remembered_across_runs(tmp_path):
    out, rej = tmp_path / "out.jsonl", tmp_path / "rej.jsonl"
    files = open_files(out, rej)
    files.record(trace("a"), "accepted")
    files.record(trace("b"), "rejected")
    files.record(trace("c"), "failed")
    files.close()
    again = open_files(out, rej)
    again.close()
    assert again.done == {(p, 0, "markers", "m") for p in "abc"}
    assert [row["problem_id"] for _, row in iter_lines(out)] == ["a"]
    assert [row["problem_id"] for _, row in iter_lines(rej)] == ["b", "c"]


def test_rejected_trace_without_rejects_file_is_remembered_in_the_state(tmp_path):
    out = tmp_path / "out.jsonl"
    files = open_files(out)
    files.record(trace("b"), "rejected")
    files.close()
    again = open_files(out)
    again.close()
    assert again.done == {("b", 0, "markers", "m")}
    assert out.read_bytes() == b""


def test_trace_written_without_its_state_line_counts_as_attempted(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(trace("a").model_dump_json(by_alias=True).encode() + b"\n")
    again = open_files(out)
    again.close()
    assert again.done == {("a", 0, "markers", "m")}


def test_files_a_run_made_and_recorded_nothing_in_are_removed(tmp_path):
    out = tmp_path / "out.jsonl"
    open_files(out).close()
    assert list(tmp_path.iterdir()) == []
    files = open_files(out)
    files.record(trace("a"), "accepted")
    files.close()
    open_files(out).close()
    assert out.exists() and state_path(out).exists()


def test_cut_last_lines_are_dropped_and_reported(tmp_path):
    out = tmp_path / "out.jsonl"
    files = open_files(out)
    files.record(trace("a"), "accepted")
    files.record(trace("b"), "rejected")
    files.close()
    state = state_path(out)
    state.write_bytes(state.read_bytes()[:-20])
    with out.open("ab") as fh:
        fh.write(b'{"schema": "tracegen.trace/1", "id": "c-0", "prob')
    warnings: list[str] = []
    again = open_files(out, warnings=warnings)
    again.close()
    assert again.done == {("a", 0, "markers", "m")}
    assert len(warnings) == 2
    assert all("incomplete last line" in w for w in warnings)
    assert [row["problem_id"] for _, row in iter_lines(out)] == ["a"]


def test_other_settings_are_refused_naming_what_changed(tmp_path):
    out = tmp_path / "out.jsonl"
    files = open_files(out)
    files.record(trace("a"), "accepted")
    files.close()
    hotter = GenerationSettings(mode="markers", model="m", temperature=1.0)
    with pytest.raises(
        ConfigError, match=r"out.jsonl holds traces .*changed: temperature.*--overwrite"
    ):
        open_files(out, settings=hotter)


def test_files_without_records_take_new_settings(tmp_path):
    out = tmp_path / "out.jsonl"
    open_files(out).close()
    hotter = GenerationSettings(mode="markers", model="m", temperature=1.0)
    files = open_files(out, settings=hotter)
    files.record(trace("a", settings_hash=hotter.digest("prompt")), "accepted")
    files.close()
    with pytest.raises(ConfigError, match="changed: temperature"):
        open_files(out)


def test_a_trace_from_other_settings_in_the_output_is_refused(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(
        trace("a", settings_hash="other").model_dump_json(by_alias=True).encode() + b"\n"
    )
    with pytest.raises(ConfigError, match="other settings"):
        open_files(out)


def test_overwrite_starts_all_files_afresh(tmp_path):
    out, rej = tmp_path / "out.jsonl", tmp_path / "rej.jsonl"
    files = open_files(out, rej)
    files.record(trace("a"), "accepted")
    files.record(trace("b"), "rejected")
    files.close()
    hotter = GenerationSettings(mode="markers", model="m", temperature=1.0)
    fresh = open_files(out, rej, settings=hotter, overwrite=True)
    fresh.close()
    assert fresh.done == set()
    assert out.read_bytes() == rej.read_bytes() == b""
    assert len(list(iter_lines(state_path(out)))) == 1


def test_a_file_that_is_not_a_trace_file_is_refused_and_left_as_it_was(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("a,b\n1,2")
    with pytest.raises(ConfigError, match=r"out.csv: not a tracegen trace file \(left as it was\)"):
        open_files(out)
    assert out.read_text() == "a,b\n1,2"
    assert not state_path(out).exists()


def test_rejects_file_must_differ_from_the_output_and_its_state(tmp_path):
    out = tmp_path / "out.jsonl"
    with pytest.raises(ConfigError, match="is the output file"):
        open_files(out, out)
    with pytest.raises(ConfigError, match="is the run's state file"):
        open_files(out, tmp_path / "out.jsonl.state")
    assert not (tmp_path / "out.jsonl.state").exists()


@pytest.mark.parametrize("name", ["out.jsonl.gz", "rejects.jsonl.gz"])
def test_a_compressed_file_name_is_refused_before_anything_is_written(tmp_path, name):
    out, rejects = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    given = {"out.jsonl.gz": (tmp_path / name, rejects), "rejects.jsonl.gz": (out, tmp_path / name)}
    with pytest.raises(ConfigError, match=rf"{name}: run writes plain JSONL"):
        open_files(*given[name])
    assert list(tmp_path.iterdir()) == []


def test_an_output_that_cannot_be_read_back_keeps_no_state_and_no_lock():
    """``-o /dev/null`` (a benchmark, a dry run): no ``/dev/null.state`` is made, and two
    such runs at once are not mistaken for the same run."""
    devnull = Path("/dev/null")
    assert state_path(devnull) == devnull
    first, second = open_files(devnull), open_files(devnull)
    first.record(trace("p"), "accepted")
    first.close()
    second.close()
    assert not Path("/dev/null.state").exists()
