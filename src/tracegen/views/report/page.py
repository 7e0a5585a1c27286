"""Assemble the report: one HTML file with its stylesheet, charts, data and script inline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import orjson

from tracegen import __version__
from tracegen.views.numbers import num, pct
from tracegen.views.report.facts import Rates, ReportFacts
from tracegen.views.report.svg import Series, columns, escape, hbars, histogram, percent
from tracegen.views.stats import Stats

SUCCESS, IDEAL, FAILED, ERROR = "#2e9e5b", "#4f6bed", "#d9534f", "#e8833a"
NEUTRAL, WARM = "#3a7ca5", "#8e6cc8"
MAX_PROBLEM_BARS = 40
MAX_PROBLEM_ROWS = 200
SHAPE = {
    "think_segments": "think segments",
    "code_blocks": "code blocks",
    "executions": "executions",
    "tool_calls": "tool calls",
    "turns": "turns",
}
COST = {
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "latency_s": "latency (s)",
}


def _asset(name: str) -> str:
    return resources.files("tracegen.views.report").joinpath("assets", name).read_text("utf-8")


def _plot(title: str, body: str, note: str = "", wide: bool = False, scroll: bool = False) -> str:
    cls = "plot wide" if wide else "plot"
    note_html = f'<p class="note">{escape(note)}</p>' if note else ""
    if scroll:
        body = f'<div class="scroll">{body}</div>'
    return f'<div class="{cls}"><h3>{escape(title)}</h3>{note_html}{body}</div>'


def _empty(text: str) -> str:
    return f'<p class="empty">{escape(text)}</p>'


def _card(key: str, value: str, sub: str = "") -> str:
    return (
        f'<div class="stat"><div class="k">{escape(key)}</div><div class="v">{escape(value)}</div>'
        f'<div class="s">{escape(sub)}</div></div>'
    )


def _few(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if names[shown:] else "")


def _cards(data: dict[str, Any], facts: ReportFacts) -> str:
    n = data["traces"]
    return "".join(
        [
            _card("traces", num(n), f"{len(data['files'])} file(s), {num(data['lines'])} lines"),
            _card("success", pct(data["success_rate"]), f"{num(data['success'])} traces"),
            _card("ideal", pct(data["ideal_rate"]), f"{num(data['ideal'])} traces"),
            _card(
                "failed episodes",
                num(data["failed_episodes"]),
                f"{len(data['failed_by_reason'])} reason(s)",
            ),
            _card("modes", num(len(facts.by_mode)), _few(sorted(facts.by_mode))),
            _card("problems", num(len(data["problems"])), ""),
            _card("malformed lines", num(data["malformed_lines"]), "skipped"),
        ]
    )


def _rates_chart(groups: dict[str, Rates], what: str) -> str:
    names = sorted(groups)
    if not names:
        return _empty("no traces")
    success = [groups[k].success / groups[k].traces for k in names]
    ideal = [groups[k].ideal / groups[k].traces for k in names]
    series = [Series("success", success, SUCCESS), Series("ideal", ideal, IDEAL)]
    return columns(
        names, series, title=f"success and ideal rate by {what}", fmt=percent, y_range=(0, 1)
    )


def _outcomes(stats: Stats, data: dict[str, Any], facts: ReportFacts) -> str:
    failures = facts.failure_kinds.most_common()
    failure_rows = [(k, float(v), f"{k}: {v} traces") for k, v in failures]
    colors = [FAILED if k.startswith("tests/") else ERROR for k, _ in failures]
    failure_chart = (
        hbars(failure_rows, title="why traces fail", color=FAILED, colors=colors)
        if failure_rows
        else _empty("no failures")
    )
    return "".join(
        [
            _plot("Success and ideal rate by mode", _rates_chart(facts.by_mode, "mode")),
            _plot("Success and ideal rate by model", _rates_chart(facts.by_model, "model")),
            _plot(
                "Score",
                histogram(stats.distributions["score"], title="score", color=SUCCESS),
                "passed / total tests of the final program",
            ),
            _plot(
                "Reward",
                histogram(facts.reward, title="reward", color=WARM),
                "2·score − 1 with structure bonuses and penalties, in [−1, 1]",
            ),
            _plot(
                "Why traces fail",
                failure_chart,
                "episode errors (kind/reason, orange) and failing tests (tests/status, red)",
                scroll=True,
            ),
        ]
    )


def _shape(stats: Stats) -> str:
    plots = [
        _plot(label.capitalize(), histogram(stats.distributions[name], title=label, color=NEUTRAL))
        for name, label in SHAPE.items()
    ]
    plots += [
        _plot(label.capitalize(), histogram(stats.distributions[name], title=label, color=WARM))
        for name, label in COST.items()
    ]
    return "".join(plots)


def _problems(data: dict[str, Any]) -> str:
    rows = list(data["problems"].items())
    shown = rows[:MAX_PROBLEM_BARS]
    bars = [
        (
            pid,
            row["success_rate"] or 0.0,
            f"{pid}: {row['success']}/{row['traces']} passed, mean score {row['mean_score']:.2f}",
        )
        for pid, row in shown
    ]
    note = "hardest first"
    if len(rows) > len(shown):
        note += f"; the {len(shown)} hardest of {len(rows)}"
    chart = hbars(
        bars, title="success per problem", color=SUCCESS, high=1.0, fmt=percent, width=960
    )
    never = sum(1 for _, row in rows if row["success"] == 0)
    note += f"; {never} problem(s) never pass"
    return _plot("Success per problem", chart, note, wide=True, scroll=True)


def _over_sample(facts: ReportFacts) -> str:
    """Where the token counts come from, when not from every trace."""
    read, seen = facts.logprob_traces_read, facts.logprob_traces
    if read == seen:
        return ""
    return f" of {read:,} traces drawn at random among the {seen:,} with logprobs"


def _logprobs(data: dict[str, Any], facts: ReportFacts) -> str:
    lp = data["logprobs"]
    traces = max(data["traces"], 1)
    coverage = [
        ("present", float(lp["present"]), f"logprobs present: {lp['present']} traces"),
        ("absent (server sent none)", float(lp["absent"]), f"absent: {lp['absent']} traces"),
        ("not requested", float(lp["not_requested"]), f"not requested: {lp['not_requested']}"),
    ]
    turns, covered = lp["assistant_turns"], lp["turns_with_logprobs"]
    ids = facts.tokens_with_id
    coverage_note = (
        f"assistant turns with logprobs: {covered}/{turns}; "
        f"tokens with a token id: {ids:,}/{facts.tokens:,}{_over_sample(facts)}"
    )
    coverage_chart = hbars(
        [(k, v / traces, tip) for k, v, tip in coverage],
        title="logprob coverage",
        color=NEUTRAL,
        high=1.0,
        fmt=percent,
    )
    id_share = ids / facts.tokens if facts.tokens else 0.0
    requests = facts.traces_with_token_requests
    coverage_chart += hbars(
        [
            ("tokens with a token id", id_share, f"{ids:,} of {facts.tokens:,} tokens"),
            (
                "traces with request token ids",
                requests / traces,
                f"{requests:,} traces record prompt and completion ids per request",
            ),
        ],
        title="token id coverage",
        color=WARM,
        high=1.0,
        fmt=percent,
    )
    by_turn = facts.mean_logprob_by_turn()
    if by_turn:
        turn_chart = columns(
            [f"turn {t}" for t, _, _ in by_turn],
            [Series("mean token logprob", [m for _, m, _ in by_turn], NEUTRAL)],
            title="mean token logprob per turn",
        )
        counted = ", ".join(f"turn {t}: {n:,}" for t, _, n in by_turn[:6])
        turn_note = (
            f"over every token of the assistant turns with logprobs{_over_sample(facts)}"
            f" ({counted})"
        )
    else:
        turn_chart, turn_note = _empty("no trace carries logprobs"), ""
    return _plot("Logprob and token id coverage", coverage_chart, coverage_note) + _plot(
        "Mean token logprob per assistant turn", turn_chart, turn_note
    )


def _table(
    caption: str, head: Sequence[str], rows: Iterable[Sequence[str]], scroll: bool = False
) -> str:
    thead = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = []
    for row in rows:
        first, *rest = row
        indent = ' class="indent"' if first.startswith("  ") else ""
        cells = f"<td{indent}>{escape(first.strip())}</td>" + "".join(
            f"<td>{escape(c)}</td>" for c in rest
        )
        body.append(f"<tr>{cells}</tr>")
    table = (
        f'<table class="numbers"><thead><tr>{thead}</tr></thead><tbody>'
        + "".join(body)
        + "</tbody></table>"
    )
    if scroll:
        table = f'<div class="scroll">{table}</div>'
    return f"<figure><figcaption>{escape(caption)}</figcaption>{table}</figure>"


def _pass_at_k(data: dict[str, Any]) -> str:
    """pass@k per mode and model, and over all of them (`tracegen.views.pass_at_k`)."""
    runs = data["pass_at_k_by_mode_model"]
    ks = sorted({k for run in runs for k in run["pass_at_k"]} | set(data["pass_at_k"]), key=int)
    rows = [
        (
            run["mode"],
            run["model"],
            num(run["problems"]),
            num(run["samples_per_problem"]),
            *(pct(run["pass_at_k"].get(k)) for k in ks),
        )
        for run in runs
    ]
    if len(runs) > 1:
        rows.append(("all", "", "", "", *(pct(data["pass_at_k"].get(k)) for k in ks)))
    head = ("mode", "model", "problems", "samples", *(f"pass@{k}" for k in ks))
    caption = "pass@k (unbiased estimator, mean over problems; k up to the fewest samples)"
    return _table(caption, head, rows, scroll=True)


def _tables(data: dict[str, Any]) -> str:
    n = data["traces"]

    def share(count: int) -> str:
        return pct(count / n if n else None)

    summary = [
        ("traces", num(n), ""),
        ("success", num(data["success"]), pct(data["success_rate"])),
        ("ideal", num(data["ideal"]), pct(data["ideal_rate"])),
        (
            "failed episodes",
            num(data["failed_episodes"]),
            share(data["failed_episodes"]),
        ),
        *((f"  {k}", num(v), share(v)) for k, v in data["failed_by_reason"].items()),
        ("malformed lines", num(data["malformed_lines"]), ""),
    ]
    dists = [
        (name, num(d["mean"]), num(d["median"]), num(d["p90"]), num(d["max"]))
        for name, d in data["distributions"].items()
    ]
    lp = data["logprobs"]
    tools = [
        ("tool-call parse failures", num(data["parse_failures"])),
        *((f"  parsed by {k}", num(v)) for k, v in data["parse_strategies"].items()),
        ("hallucinated results stripped", num(data["hallucinated_results"])),
        ("  in traces", num(data["traces_with_hallucinated_results"])),
        ("execution timeouts", num(data["exec_timeouts"])),
        ("repetition stops", num(data["repetition_stops"])),
        ("logprobs present", num(lp["present"])),
        ("logprobs absent", num(lp["absent"])),
        ("logprobs not requested", num(lp["not_requested"])),
        ("logprob coverage", pct(lp["coverage"])),
        ("assistant turns with logprobs", f"{lp['turns_with_logprobs']}/{lp['assistant_turns']}"),
    ]
    parts = [
        _table("Traces", ("", "count", "share"), summary),
        _table("Distributions", ("metric", "mean", "median", "p90", "max"), dists),
        _table("Tool calls, hallucinations, logprobs", ("", "count"), tools),
    ]
    if "by" in data:
        groups = [
            (
                key,
                num(g["traces"]),
                pct(g["success_rate"]),
                pct(g["ideal_rate"]),
                num(g["failed_episodes"]),
                num(g["mean"]["score"]),
                num(g["mean"]["turns"]),
                num(g["mean"]["completion_tokens"]),
                num(g["mean"]["latency_s"]),
            )
            for key, g in data["by"]["groups"].items()
        ]
        head = ("mode", "traces", "success", "ideal", "failed", "score", "turns", "tokens", "secs")
        parts.append(_table("By mode (means)", head, groups))
    parts.append(_pass_at_k(data))
    problems = list(data["problems"].items())
    rows = [
        (pid, num(r["traces"]), num(r["success"]), pct(r["success_rate"]), num(r["mean_score"]))
        for pid, r in problems[:MAX_PROBLEM_ROWS]
    ]
    caption = "Per problem (hardest first)"
    if len(problems) > MAX_PROBLEM_ROWS:
        caption += f": the first {MAX_PROBLEM_ROWS} of {len(problems)} (stats --json lists all)"
    header = ("problem", "traces", "success", "rate", "mean score")
    parts.append(_table(caption, header, rows, scroll=True))
    return "".join(parts)


def _embed(records: list[dict[str, Any]]) -> str:
    """JSON for a ``<script type="application/json">``: no ``<`` can close the element."""
    return orjson.dumps(records).decode().replace("<", "\\u003c")


def render_page(
    stats: Stats, facts: ReportFacts, sample: list[dict[str, Any]], title: str = "tracegen report"
) -> str:
    """The whole report as one self-contained HTML document."""
    data = stats.to_json()
    created = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = [Path(f).name for f in data["files"]]
    files = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if names[3:] else "")
    meta = f"{files} · {num(data['traces'])} traces · tracegen {__version__} · {created}"
    note = (
        f"{len(sample):,} of {data['traces']:,} traces are embedded for browsing"
        f" (a random sample of at most {facts.sample_size:,}, shared evenly among each mode's"
        " ideal, successful, failed and errored traces; every number and plot above counts all"
        " traces)."
        if len(sample) < data["traces"]
        else f"All {len(sample):,} traces are embedded for browsing."
    )
    return Template(_asset("page.html")).substitute(
        title=escape(title),
        meta=escape(meta),
        css=_asset("page.css"),
        js=_asset("browser.js"),
        cards=_cards(data, facts),
        outcomes=_outcomes(stats, data, facts),
        shape=_shape(stats),
        problems=_problems(data),
        logprobs=_logprobs(data, facts),
        tables=_tables(data),
        sample_note=escape(note),
        traces=_embed(sample),
    )
