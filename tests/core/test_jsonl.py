"""The one JSONL reader and writer: lazy, FILE:LINE errors, crash-safe."""

import gzip
import os
import resource

import msgspec
import pytest

from tracegen import jsonl
from tracegen.errors import InputFileError, JsonlError, OutputError
from tracegen.jsonl import (
    JsonlWriter,
    iter_lines,
    iter_records,
    iter_struct_blocks,
    line_spans,
    repair_tail,
)
from tracegen.schema import Trace


def test_writer_appends_whole_lines_and_reader_yields_them_in_order(tmp_path):
    path = tmp_path / "out.jsonl"
    with JsonlWriter(path) as w:
        w.write({"a": 1})
    with JsonlWriter(path) as w:
        w.write({"a": 2})
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'
    assert [row for _, row in iter_lines(path)] == [{"a": 1}, {"a": 2}]


def test_reader_is_lazy(tmp_path):
    path = tmp_path / "lazy.jsonl"
    path.write_text('{"ok": 1}\nnot json\n')
    rows = iter_lines(path)
    assert next(rows) == (1, {"ok": 1})
    with pytest.raises(JsonlError):
        next(rows)


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"ok": 1}\n\n{"broken": \n')
    with pytest.raises(JsonlError, match=rf"^{path}:3: not valid JSON"):
        list(iter_lines(path))


def test_non_object_line_names_file_and_line(tmp_path):
    path = tmp_path / "list.jsonl"
    path.write_text("[1, 2]\n")
    with pytest.raises(JsonlError, match=r":1: expected a JSON object, got list"):
        list(iter_lines(path))


def test_errors_can_be_collected_instead_of_raised(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"a": 1}\nnope\n{"a": 2}\n')
    errors: list[JsonlError] = []
    rows = [row for _, row in iter_lines(path, on_error=errors.append)]
    assert rows == [{"a": 1}, {"a": 2}]
    assert len(errors) == 1
    assert str(errors[0]).startswith(f"{path}:2: not valid JSON (")


def test_schema_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text('{"schema": "tracegen.trace/1", "id": "x", "problem_id": "p", "mode": "m"}\n')
    with pytest.raises(JsonlError, match=rf"^{path}:1: not a valid Trace: model: Field required"):
        list(iter_records(path, Trace))


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(InputFileError, match="no such file"):
        list(iter_lines(tmp_path / "missing.jsonl"))


def test_gzip_files_are_read_transparently(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b'{"a": 1}\n')
    assert list(iter_lines(path)) == [(1, {"a": 1})]


def test_repair_drops_only_a_last_line_cut_by_a_crash(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "b": "cut her')
    assert repair_tail(path) == len(b'{"a": 3, "b": "cut her')
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}\n'
    assert repair_tail(path) == 0


def test_repair_of_a_single_cut_line_leaves_an_empty_file(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_bytes(b'{"a": ')
    assert repair_tail(path) == 6
    assert path.read_bytes() == b""


def test_repair_of_a_missing_file_does_nothing(tmp_path):
    assert repair_tail(tmp_path / "none.jsonl") == 0


def test_a_failed_write_leaves_no_partial_record(tmp_path):
    path = tmp_path / "small.jsonl"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with JsonlWriter(path) as w:
        w.write({"a": 1})
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))
        try:
            with pytest.raises(OutputError, match=rf"^{path}: cannot write"):
                w.write({"big": "x" * 1000})
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        w.write({"a": 2})
    assert [row for _, row in iter_lines(path)] == [{"a": 1}, {"a": 2}]


def test_unwritable_output_is_one_clear_error(tmp_path):
    target = tmp_path / "is-a-dir"
    target.mkdir()
    with pytest.raises(OutputError, match=rf"^{target}: cannot open for writing"):
        JsonlWriter(target)


def test_a_line_over_the_cap_is_reported_and_the_next_ones_still_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGEN_MAX_LINE_BYTES", "20")
    path = tmp_path / "long.jsonl"
    path.write_text('{"a": 1}\n{"long": "' + "x" * 3_000_000 + '"}\n{"a": 2}\n')
    errors = []
    assert [row for _, row in iter_lines(path, on_error=errors.append)] == [{"a": 1}, {"a": 2}]
    assert [str(e) for e in errors] == [
        f"{path}:2: line of 2.86 MB exceeds the 20 bytes cap (TRACEGEN_MAX_LINE_BYTES)"
    ]


@pytest.mark.parametrize("cap", [1, 7, 8, 9, 1 << 20])
def test_lines_up_to_the_cap_are_read_whole(tmp_path, monkeypatch, cap):
    monkeypatch.setattr("tracegen.jsonl._PIECE", 4)
    monkeypatch.setenv("TRACEGEN_MAX_LINE_BYTES", str(cap))
    path = tmp_path / "edge.jsonl"
    path.write_bytes(b'{"a":1}\n{"ab":12}\n{"a":1}')
    errors = []
    rows = [row for _, row in iter_lines(path, on_error=errors.append)]
    assert len(rows) + len(errors) == 3
    assert [len(str(e)) > 0 for e in errors] == [True] * len(errors)
    assert len(rows) == (3 if cap >= 9 else 2 if cap >= 7 else 0)


def test_a_fifo_is_written_as_a_stream_and_one_nobody_reads_is_an_error(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="a FIFO that no process reads"):
        JsonlWriter(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with JsonlWriter(fifo) as w:
            w.write({"a": 1})
        assert os.read(reader, 100) == b'{"a":1}\n'
    finally:
        os.close(reader)


class _A(msgspec.Struct):
    a: int


@pytest.mark.parametrize("block_bytes", [1 << 21, 24])
def test_struct_blocks_give_every_line_read_its_byte_offset(
    tmp_path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
) -> None:
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", block_bytes)
    path = tmp_path / "t.jsonl"
    lines = [b'{"a": 1}', b"", b"not json", b'{"a": 22}', b"   ", b'{"a": "x"}', b'{"a": 333}']
    path.write_bytes(b"\n".join(lines))
    data = path.read_bytes()
    good = [
        (offset, int(line[6:-1]))
        for offset, line in zip(_starts(lines), lines, strict=True)
        if line[6:-1].isdigit()
    ]
    lines_read, bad, _ = _read_blocks(path, (0, None))
    assert (lines_read, bad) == (7, [3, 6])
    for start, end in (0, None), *line_spans(path, 12):
        stop = len(data) if end is None else end
        assert _read_blocks(path, (start, end))[2] == [g for g in good if start <= g[0] < stop]
    for offset, a in good:
        assert data[offset:].startswith(b'{"a": %d}' % a)


def _read_blocks(
    path, span: tuple[int, int | None]
) -> tuple[int, list[int], list[tuple[int, int]]]:
    """Lines read, bad line numbers, and (offset, a) of each struct of ``span``."""
    bad: list[int] = []
    blocks = list(
        iter_struct_blocks(
            path, msgspec.json.Decoder(_A), on_error=lambda n, _: bad.append(n), span=span
        )
    )
    read = [(o, item.a) for b in blocks for item, o in zip(b.items, b.offsets, strict=True)]
    return sum(b.lines for b in blocks), bad, read


def _starts(lines: list[bytes]) -> list[int]:
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    return starts
