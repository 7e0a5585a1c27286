from __future__ import annotations

import functools
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import orjson
import pytest

from tests.support.traces import MODES, every_mode_and_failure, markers_trace, write_traces
from tracegen.jsonl import line_spans
from tracegen.schema import TokenRequest
from tracegen.views import stats as stats_module
from tracegen.views.report import facts as facts_module
from tracegen.views.report.build import build_report
from tracegen.views.report.facts import HASHES, ReportFacts, ReportLine, outcome
from tracegen.views.stats import collect_with


def _tracegen(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracegen", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _embedded(page: str) -> list[dict]:
    found = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert found is not None
    return orjson.loads(found.group(1))


@pytest.fixture
def every_kind(tmp_path: Path) -> Path:
    return write_traces(tmp_path / "traces.jsonl", every_mode_and_failure())


def test_report_writes_one_page_that_needs_nothing_from_outside(
    tmp_path: Path, every_kind: Path
) -> None:
    out = tmp_path / "report.html"
    result = _tracegen("report", every_kind, "-o", out)
    assert result.returncode == 0, result.stderr
    assert f"written to {out}" in result.stderr
    page = out.read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "http://" not in page.split('id="trace-data"')[0]
    assert page.count('<svg class="chart"') >= 15
    traces = _embedded(page)
    assert len(traces) == len(every_mode_and_failure())


def test_report_accepts_globs_and_counts_every_file(tmp_path: Path) -> None:
    traces = every_mode_and_failure()
    write_traces(tmp_path / "a.jsonl", traces[:5])
    write_traces(tmp_path / "b.jsonl", traces[5:])
    page = build_report([str(tmp_path / "*.jsonl")])
    assert f"{len(traces)} traces" in page
    assert len(_embedded(page)) == len(traces)


def test_browsing_sample_is_bounded_and_shared_among_modes_and_outcomes(tmp_path: Path) -> None:
    traces = every_mode_and_failure() * 3
    strata = {(t.mode, outcome(t.success, t.is_ideal, t.error is not None)) for t in traces}
    path = write_traces(tmp_path / "three-times.jsonl", traces)
    page = build_report([str(path)], sample=len(strata))
    sample = _embedded(page)
    assert {(t["mode"], t["outcome"]) for t in sample} == strata
    assert f"{len(strata)} of {len(traces)} traces are embedded for browsing" in page


def test_embedded_traces_carry_what_show_renders(every_kind: Path) -> None:
    sample = {t["id"]: t for t in _embedded(build_report([str(every_kind)]))}
    inline = sample["inline-tools-ideal"]
    assert [s["kind"] for s in inline["steps"]] == [
        "think",
        "tool_call",
        "tool_response",
        "think",
        "code",
    ]
    assert [s["source"] for s in inline["steps"]][2] == "system"
    assert inline["verdict"]["tests"][0] == {
        "name": "t0",
        "passed": True,
        "expected": "3",
        "actual": "3",
        "error": None,
    }
    assert sample["structured-sandbox"]["failure"] == "sandbox/crashed"
    assert sample["tool-feedback-tests-timeout"]["failure"] == "tests/timeout"
    assert "logprobs" not in inline


def test_report_plots_count_every_mode_and_failure_kind(every_kind: Path) -> None:
    page = build_report([str(every_kind)])
    for mode in MODES:
        assert f"<title>{mode} · success: " in page
    failures = Counter(
        f"{t.error.kind}/{t.error.reason}" if t.error else f"tests/{t.verdict.status}"
        for t in every_mode_and_failure()
        if not t.success and (t.error or t.verdict)
    )
    for kind, n in failures.items():
        assert f"{kind}: {n} traces" in page


def test_mean_token_logprob_per_turn_is_over_every_token_of_that_turn(tmp_path: Path) -> None:
    traces = every_mode_and_failure()
    path = write_traces(tmp_path / "t.jsonl", traces)
    turns: dict[int, list[float]] = {}
    for trace in traces:
        for i, turn in enumerate(trace.logprobs):
            turns.setdefault(i, []).extend(t.logprob for t in turn.tokens)
    page = build_report([str(path)])
    for i, values in turns.items():
        mean = sum(values) / len(values)
        assert f"turn {i + 1}: {mean:.2f}".rstrip("0").rstrip(".") in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "missing.jsonl: no such file"),
        (["nothing-*.jsonl"], "nothing-*.jsonl: no file matches"),
        (["TRACES", "--sample", "-1"], "--sample: expected 0 or more"),
        (["TRACES", "--strict", "-o", "r.html"], "not valid JSON"),
    ],
)
def test_bad_report_input_is_one_line_and_exit_2(
    tmp_path: Path, every_kind: Path, args: list[str], message: str
) -> None:
    (tmp_path / "bad.jsonl").write_bytes(every_kind.read_bytes() + b"{oops\n")
    argv = [str(tmp_path / "bad.jsonl") if a == "TRACES" else a for a in args]
    result = subprocess.run(
        [sys.executable, "-m", "tracegen", "report", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_token_id_coverage_counts_tokens_and_requests_that_carry_ids(tmp_path: Path) -> None:
    traces = every_mode_and_failure()
    first = traces[0]
    turn = first.logprobs[0]
    tokens = [msgspec.structs.replace(t, id=100 + i) for i, t in enumerate(turn.tokens)]
    request = TokenRequest(message_index=2, prompt_ids=[1, 2, 3], completion_ids=[100, 101])
    traces[0] = first.model_copy(
        update={
            "logprobs": [turn.model_copy(update={"tokens": tokens})],
            "token_requests": [request],
        }
    )
    all_tokens = sum(len(t.tokens) for trace in traces for t in trace.logprobs)
    page = build_report([str(write_traces(tmp_path / "t.jsonl", traces))])
    assert f"tokens with a token id: {len(tokens)}/{all_tokens}" in page
    assert "1 traces record prompt and completion ids per request" in page


def _facts(path: Path, workers: int) -> dict[str, object]:
    tally = functools.partial(ReportFacts, sample_size=5, logprob_cut=HASHES // 2)
    stats, facts = collect_with([path], tally, ReportLine, by="mode", workers=workers)
    return {
        "stats": stats.to_json(),
        "by mode": dict(facts.by_mode),
        "by model": dict(facts.by_model),
        "reward": facts.reward,
        "failure kinds": facts.failure_kinds,
        # summed per span, so equal to the last bits only
        "logprob by turn": [(t, round(m, 9), n) for t, m, n in facts.mean_logprob_by_turn()],
        "tokens": (facts.tokens, facts.tokens_with_id),
        "traces with logprobs": (facts.logprob_traces, facts.logprob_traces_read),
        "strata": {key: (s.seen, s.kept) for key, s in facts.strata.items()},
        "browsed": facts.sample_positions(random.Random(0)),
    }


def test_a_large_file_gives_the_same_report_counts_however_it_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_traces(tmp_path / "t.jsonl", every_mode_and_failure() * 30)
    whole = _facts(path, workers=1)
    monkeypatch.setattr(stats_module, "SPAN_BYTES", 20_000)
    assert len(line_spans(path, stats_module.SPAN_BYTES)) > 4
    assert _facts(path, workers=1) == whole
    assert _facts(path, workers=2) == whole
    with_logprobs, read = whole["traces with logprobs"]
    assert 0 < read < with_logprobs  # the cut lets about half of them through


def test_a_large_file_has_the_tokens_of_a_share_of_its_traces_counted_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = every_mode_and_failure() * 20
    path = write_traces(tmp_path / "t.jsonl", traces)
    size = path.stat().st_size
    monkeypatch.setattr(facts_module, "LOGPROB_BYTES", size // 3)
    cut = facts_module.logprob_cut(size)
    offsets = [0]
    for line in path.read_bytes().splitlines(keepends=True)[:-1]:
        offsets.append(offsets[-1] + len(line))
    read = [
        t
        for t, offset in zip(traces, offsets, strict=True)
        if t.logprobs and facts_module._key((0, offset)) < cut
    ]
    with_logprobs = sum(bool(t.logprobs) for t in traces)
    assert 0 < len(read) < with_logprobs
    page = build_report([str(path)])
    note = f"of {len(read):,} traces drawn at random among the {with_logprobs:,} with logprobs"
    assert note in page
    tokens = [token for t in read for turn in t.logprobs for token in turn.tokens]
    with_id = sum(token.id is not None for token in tokens)
    assert f"tokens with a token id: {with_id:,}/{len(tokens):,} {note}" in page


def test_the_pages_own_text_shows_control_and_bidi_characters_as_escapes(tmp_path: Path) -> None:
    hostile = "p\u202etxt.exe\x1b[2K\x9b<b>"
    traces = [markers_trace(i, problem_id=hostile) for i in range(3)]
    traces[0].model = hostile
    page = build_report([str(write_traces(tmp_path / "t.jsonl", traces))])
    outside = re.sub(
        r'<script type="application/json" id="trace-data">.*?</script>', "", page, flags=re.S
    )
    assert not re.search("[\x1b\x9b\u202a-\u202e\u2066-\u2069]", outside)
    assert "p\\u202etxt.exe\\x1b[2K\\x9b&lt;b&gt;" in outside
    assert {t["problem_id"] for t in _embedded(page)} == {hostile}, "the data itself is kept"
