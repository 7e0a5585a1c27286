"""`tracegen dedup`, `tracegen decontaminate` and the dataset card of `convert --to-hf`."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import datasets
import orjson
import pytest
import yaml

from tests.support.traces import failed_trace, markers_trace, write_traces
from tracegen import __version__
from tracegen.export.decontaminate import humaneval_file
from tracegen.schema import ChatMessage, Trace

LONG = """def running_stats(values):
    total = 0
    count = 0
    smallest = None
    largest = None
    for value in values:
        total += value
        count += 1
        if smallest is None or value < smallest:
            smallest = value
        if largest is None or value > largest:
            largest = value
    mean = total / count if count else 0.0
    spread = (largest - smallest) if count else 0
    return {"mean": mean, "min": smallest, "max": largest, "spread": spread, "n": count}
"""
# The same program laid out differently, with comments: an exact duplicate once normalised.
LONG_RELAID = "# stats\n" + LONG.replace("total = 0\n", "total = 0   # running sum\n\n")
# One line changed: a near duplicate.
LONG_TWEAKED = LONG.replace("spread = (largest - smallest)", "spread = abs(largest - smallest)")
OTHER = "def running_stats(values):\n    import statistics\n    return statistics.mean(values)\n"


def _trace(
    name: str, code: str | None, problem: str = "stats", *, success: bool, ideal: bool = False
) -> Trace:
    trace = markers_trace(0, problem_id=problem, passed=2 if success else 0)
    return trace.model_copy(
        update={"id": name, "final_code": code, "success": success, "is_ideal": ideal}
    )


def _tracegen(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracegen", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def _ids(path: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in path.read_bytes().splitlines()]


@pytest.fixture
def with_duplicates(tmp_path: Path) -> Path:
    return write_traces(
        tmp_path / "traces.jsonl",
        [
            _trace("first", LONG, success=False),
            _trace("relaid", LONG_RELAID, success=True),  # exact duplicate of first, better
            _trace("tweaked", LONG_TWEAKED, success=True, ideal=True),  # near, best of three
            _trace("different", OTHER, success=True),
            _trace("other-problem", LONG, problem="other", success=True),
            _trace("no-code", None, success=False),
            failed_trace(9, problem_id="stats"),
        ],
    )


def test_dedup_removes_exactly_the_duplicates_and_keeps_the_best_of_each_cluster(
    tmp_path: Path, with_duplicates: Path
) -> None:
    out, removed = tmp_path / "dedup.jsonl", tmp_path / "removed.jsonl"
    result = _tracegen("dedup", with_duplicates, "-o", out, "--removed", removed)
    assert result.returncode == 0, result.stderr
    assert _ids(out) == ["tweaked", "different", "other-problem", "no-code", "failed-9"]
    assert "kept 5 of 7 traces; removed 0 exact and 2 near duplicates from 1 clusters" in (
        result.stderr
    )
    rows = {r["id"]: r for r in map(orjson.loads, removed.read_bytes().splitlines())}
    assert rows["first"]["duplicate_of"] == rows["relaid"]["duplicate_of"] == "tweaked"
    assert {r["kind"] for r in rows.values()} == {"near"}
    assert all(0.85 <= r["similarity"] < 1 for r in rows.values())
    lines = with_duplicates.read_bytes().splitlines(keepends=True)
    assert out.read_bytes() == b"".join(lines[i] for i in (2, 3, 4, 5, 6))


@pytest.mark.slow
def test_dedup_gives_the_same_result_in_every_process(
    tmp_path: Path, with_duplicates: Path
) -> None:
    """Signatures once used Python's per-process string hash: 1 seed in 40 kept a near
    duplicate."""
    outputs = set()
    for seed in ("0", "15", "4242"):
        out = tmp_path / f"dedup-{seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = _tracegen("dedup", with_duplicates, "-o", out, env=env)
        assert result.returncode == 0, result.stderr
        outputs.add(out.read_bytes())
    assert len(outputs) == 1


@pytest.mark.slow
def test_dedup_counts_exact_duplicates_of_the_kept_trace_as_exact(
    tmp_path: Path, with_duplicates: Path
) -> None:
    traces = [_trace("a", LONG, success=False), _trace("b", LONG_RELAID, success=True)]
    out = tmp_path / "out.jsonl"
    result = _tracegen("dedup", write_traces(tmp_path / "t.jsonl", traces), "-o", out)
    assert _ids(out) == ["b"]
    assert "removed 1 exact and 0 near" in result.stderr


@pytest.mark.slow
def test_a_higher_threshold_keeps_near_duplicates(tmp_path: Path, with_duplicates: Path) -> None:
    out = tmp_path / "out.jsonl"
    _tracegen("dedup", with_duplicates, "-o", out, "--threshold", "0.99")
    assert _ids(out) == ["relaid", "tweaked", "different", "other-problem", "no-code", "failed-9"]


@pytest.mark.slow
def test_dedup_by_text_compares_what_the_assistant_wrote(tmp_path: Path) -> None:
    a = _trace("a", LONG, success=True)
    b = _trace("b", OTHER, success=True)  # same assistant text as a, other final code
    c = a.model_copy(
        update={
            "id": "c",
            "messages": [*a.messages[:2], ChatMessage(role="assistant", content="Something else")],
        }
    )
    out = tmp_path / "out.jsonl"
    _tracegen("dedup", write_traces(tmp_path / "t.jsonl", [a, b, c]), "-o", out, "--by", "text")
    assert _ids(out) == ["a", "c"]


BENCHMARK_CODE = (
    "    for idx, elem in enumerate(numbers):\n"
    "        for idx2, elem2 in enumerate(numbers):\n"
    "            if idx != idx2:\n"
    "                distance = abs(elem - elem2)\n"
    "                if distance < threshold:\n"
    "                    return True\n\n    return False\n"
)


def _humaneval(task: str) -> dict:
    with gzip.open(humaneval_file(), "rt") as fh:
        return next(r for r in map(orjson.loads, fh) if r["task_id"] == task)


def _asking(name: str, prompt: str, code: str | None) -> Trace:
    trace = markers_trace(0, problem_id=name)
    messages = [trace.messages[0], ChatMessage(role="user", content=prompt), trace.messages[2]]
    return trace.model_copy(update={"id": name, "messages": messages, "final_code": code})


@pytest.fixture
def contaminated(tmp_path: Path) -> Path:
    mbpp = orjson.loads(Path("tests/data/problems/mbpp_sample.jsonl").read_bytes().splitlines()[0])
    words_13 = "one two three four five six seven eight nine ten eleven twelve thirteen"
    (tmp_path / "mine.jsonl").write_text(
        orjson.dumps(
            {
                "id": "mine/1",
                "prompt": f"Say {words_13} please.",
                "entry_point": "f",
                "tests": [{"name": "t", "kind": "io", "args": [1], "expected": 1}],
            }
        ).decode()
        + "\n"
    )
    return write_traces(
        tmp_path / "traces.jsonl",
        [
            _asking("clean", "Write add(a, b).", "def add(a, b):\n    return a + b"),
            _asking("he-prompt", _humaneval("HumanEval/0")["prompt"], "def f(): pass"),
            _asking("he-code", "Are two numbers close?", "def f(numbers):\n" + BENCHMARK_CODE),
            _asking("mbpp-prompt", mbpp["text"] + " " + " ".join(mbpp["test_list"]), None),
            _asking("twelve", "Tell " + " ".join(words_13.split()[:12]) + " now.", None),
            _asking("thirteen", f"Now {words_13} again.", None),
        ],
    )


def test_decontaminate_drops_exactly_the_traces_that_share_a_13_gram(
    tmp_path: Path, contaminated: Path
) -> None:
    out, dropped = tmp_path / "clean.jsonl", tmp_path / "dropped.jsonl"
    against = "humaneval,tests/data/problems/mbpp_sample.jsonl"
    result = _tracegen(
        "decontaminate",
        contaminated,
        "-o",
        out,
        "--against",
        against,
        "--against",
        tmp_path / "mine.jsonl",
        "--dropped",
        dropped,
    )
    assert result.returncode == 0, result.stderr
    assert _ids(out) == ["clean", "twelve"]
    rows = {r["id"]: r for r in map(orjson.loads, dropped.read_bytes().splitlines())}
    assert rows["he-prompt"]["benchmark"] == "humaneval"
    assert rows["he-prompt"]["trace_part"] == "problem"
    assert rows["he-prompt"]["benchmark_problem"] == "HumanEval/0"
    assert rows["he-code"]["trace_part"] == "final_code"
    assert rows["he-code"]["benchmark_part"] == "solution"
    assert rows["mbpp-prompt"]["benchmark"] == "tests/data/problems/mbpp_sample.jsonl"
    assert rows["thirteen"]["ngram"] == (
        "one two three four five six seven eight nine ten eleven twelve thirteen"
    )
    assert "kept 2 of 6 traces; dropped 4" in result.stderr


@pytest.mark.slow
def test_a_shorter_ngram_catches_shorter_overlaps(tmp_path: Path, contaminated: Path) -> None:
    out = tmp_path / "clean.jsonl"
    mine = tmp_path / "mine.jsonl"
    _tracegen("decontaminate", contaminated, "-o", out, "--against", mine, "--ngram", "12")
    assert "twelve" not in _ids(out)


@pytest.mark.slow
def test_dedup_then_decontaminate_then_convert_states_both_in_the_card(
    tmp_path: Path, with_duplicates: Path
) -> None:
    (tmp_path / "traces.jsonl.state").write_bytes(
        orjson.dumps(
            {"schema": "tracegen.state/1", "settings_hash": "", "settings": {"temperature": 0.7}}
        )
        + b"\n"
    )
    deduped, clean, hf = tmp_path / "d.jsonl", tmp_path / "c.jsonl", tmp_path / "hf"
    assert _tracegen("dedup", with_duplicates, "-o", deduped).returncode == 0
    result = _tracegen("decontaminate", deduped, "-o", clean, "--against", "humaneval")
    assert result.returncode == 0, result.stderr
    steps = orjson.loads((tmp_path / "c.jsonl.tracegen.json").read_bytes())["steps"]
    assert [s["step"] for s in steps] == ["dedup", "decontaminate"]
    result = _tracegen("convert", clean, "--chat-format", "--only-success", "--to-hf", hf)
    assert result.returncode == 0, result.stderr

    card = (hf / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert "license" in meta and meta["license"] is None
    assert meta["size_categories"] == ["n<1K"]
    assert "markers" in meta["tags"]
    assert f"tracegen {__version__}" in body
    assert "`qwen3:8b`" in body and "`http://127.0.0.1:11434`" in body
    assert "- rows: 3 (format `chat`)" in body
    assert "`--only-success`: 1 traces left out" in body
    assert "failed episodes (records with an `error`) skipped: 1" in body
    assert "`tracegen dedup --by code --threshold 0.85`" in body
    assert "removed 0 exact and 2 near duplicates in 1 clusters" in body
    assert "`tracegen decontaminate --ngram 13`" in body and "`humaneval` (164 problems)" in body
    assert datasets.load_from_disk(str(hf)).num_rows == 3


@pytest.mark.slow
def test_the_card_lists_the_settings_of_each_hash_from_the_state_file(
    tmp_path: Path, with_duplicates: Path
) -> None:
    state = {"schema": "tracegen.state/1", "settings_hash": "", "settings": {"temperature": 0.7}}
    (tmp_path / "traces.jsonl.state").write_bytes(orjson.dumps(state) + b"\n")
    hf = tmp_path / "hf"
    assert _tracegen("convert", with_duplicates, "--chat-format", "--to-hf", hf).returncode == 0
    card = (hf / "README.md").read_text()
    assert '(7 traces): `{"temperature":0.7}`' in card
    assert "- none recorded" in card


def test_a_hostile_model_name_or_curation_record_cannot_add_markdown_to_the_card(
    tmp_path: Path,
) -> None:
    from markdown_it import MarkdownIt

    hostile = "m`\n# Pwned\n![x](https://evil.example/x.png)\n<img src=x>\u202e`` `"
    traces = [markers_trace(i) for i in range(3)]
    for trace in traces:
        trace.model = hostile
    source = write_traces(tmp_path / "traces.jsonl", traces)
    step = {"step": "dedup", "input": hostile, "kept": "![y](https://evil.example/y.png)"}
    (tmp_path / "traces.jsonl.tracegen.json").write_bytes(
        orjson.dumps({"schema": "tracegen.curation/1", "steps": [step]})
    )
    hf = tmp_path / "hf"
    assert _tracegen("convert", source, "--chat-format", "--to-hf", hf).returncode == 0
    card = (hf / "README.md").read_text()
    tokens = MarkdownIt("commonmark").parse(card.split("---\n", 2)[2])
    inline = [child for t in tokens for child in t.children or []]
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert all("Pwned" not in h for h in headings), headings
    assert [c for c in inline if c.type in ("image", "html_inline", "link_open")] == [
        c
        for c in inline
        if c.type == "link_open" and c.attrGet("href") == "https://pypi.org/project/tracegen/"
    ]
    assert "\u202e" not in card
    assert "tracegen dedup" in card and "kept `![y](https://evil.example/y.png)`" in card
    codes = [c.content for c in inline if c.type == "code_inline"]
    assert any(c.startswith("m`\\n# Pwned") for c in codes), codes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dedup", "missing.jsonl", "-o", "o.jsonl"], "missing.jsonl: no such file"),
        (["dedup", "T", "-o", "o.jsonl", "--threshold", "1.5"], "--threshold: expected a number"),
        (["dedup", "T", "-o", "o.jsonl", "--by", "words"], "--by: expected code or text"),
        (["dedup", "T", "-o", "T"], "output would overwrite the input"),
        (["dedup", "BAD", "-o", "o.jsonl"], "bad.jsonl:2: not valid JSON"),
        (["decontaminate", "T", "-o", "o.jsonl", "--against", "mbpp"], "pass mbpp's file"),
        (["decontaminate", "T", "-o", "o.jsonl", "--against", "x.jsonl"], "x.jsonl: no such file"),
        (["decontaminate", "T", "-o", "o.jsonl", "--against", ","], "--against: name at least"),
        (
            ["decontaminate", "T", "-o", "o.jsonl", "--against", "humaneval", "--ngram", "0"],
            "--ngram",
        ),
        (["decontaminate", "BAD", "-o", "o.jsonl", "--against", "humaneval"], "bad.jsonl:2"),
    ],
)
def test_bad_curation_input_is_one_line_and_exit_2(
    tmp_path: Path, with_duplicates: Path, args: list[str], message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(with_duplicates.read_bytes().splitlines(keepends=True)[0] + b"{oops\n")
    names = {"T": str(with_duplicates), "BAD": str(bad)}
    result = _tracegen(*(names.get(a, a) for a in args), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "o.jsonl").exists()
