"""The terminal view of `tracegen stats`: rich tables and small bar charts.

It draws what `Stats.to_json` says (and the value counts behind its histograms), so it
knows nothing of how traces are read; `tracegen stats --json` never imports it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table

from tracegen.terminal import console as safe_console
from tracegen.terminal import text_table, untrusted
from tracegen.views.numbers import num, pct

BARS = "▁▂▃▄▅▆▇█"
HISTOGRAM_BINS = 12
RATE_WIDTH = 20
MAX_PROBLEM_ROWS = 30
PIPE_WIDTH = 120


def histogram(counts: Counter[float], bins: int = HISTOGRAM_BINS) -> str:
    """A one-line bar chart of the values counted: one bar per integer, or ``bins`` bins."""
    if not counts:
        return ""
    lo, hi = min(counts), max(counts)
    integers = all(float(v).is_integer() for v in counts)
    if integers and hi - lo < bins:
        buckets = [counts.get(lo + i, 0) for i in range(int(hi - lo) + 1)]
    else:
        buckets = [0] * bins
        width = (hi - lo) / bins or 1.0
        for value, n in counts.items():
            buckets[min(int((value - lo) / width), bins - 1)] += n
    peak = max(buckets)
    return "".join(BARS[math.ceil(n / peak * len(BARS)) - 1] if n else " " for n in buckets)


def rate_bar(rate: float | None) -> str:
    if rate is None:
        return ""
    full = round(rate * RATE_WIDTH)
    return "█" * full + "░" * (RATE_WIDTH - full)


def _summary(data: dict[str, Any]) -> Table:
    table = text_table(title="Traces", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column(justify="right")
    table.add_column()
    table.add_row("files", str(len(data["files"])), "", "")
    table.add_row("lines", num(data["lines"]), "", "")
    table.add_row("malformed lines", num(data["malformed_lines"]), "", "")
    table.add_row("traces", num(data["traces"]), "", "")
    for key in ("success", "ideal"):
        rate = data[f"{key}_rate"]
        table.add_row(key, num(data[key]), pct(rate), rate_bar(rate))
    failed = data["failed_episodes"]
    table.add_row("failed episodes", num(failed), pct(_share(failed, data["traces"])), "")
    for reason, n in data["failed_by_reason"].items():
        table.add_row(untrusted(f"  {reason}"), num(n), pct(_share(n, data["traces"])), "")
    return table


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _distributions(data: dict[str, Any], counts: Mapping[str, Counter[float]]) -> Table:
    table = text_table(title="Distributions (every trace)", title_justify="left")
    table.add_column("metric", style="bold")
    for name in ("mean", "median", "p90", "max"):
        table.add_column(name, justify="right")
    table.add_column("histogram (min → max)")
    for name, d in data["distributions"].items():
        table.add_row(
            name,
            num(d["mean"]),
            num(d["median"]),
            num(d["p90"]),
            num(d["max"]),
            histogram(counts[name]),
        )
    return table


def _tools(data: dict[str, Any]) -> Table:
    table = text_table(title="Tool calls, hallucinations, logprobs", title_justify="left")
    table.add_column("", style="bold")
    table.add_column("count", justify="right")
    table.add_row("tool-call parse failures", num(data["parse_failures"]))
    for strategy, n in data["parse_strategies"].items():
        table.add_row(untrusted(f"  parsed by {strategy}"), num(n))
    table.add_row("hallucinated results stripped", num(data["hallucinated_results"]))
    table.add_row("  in traces", num(data["traces_with_hallucinated_results"]))
    table.add_row("execution timeouts", num(data["exec_timeouts"]))
    table.add_row("repetition stops", num(data["repetition_stops"]))
    lp = data["logprobs"]
    table.add_row("logprobs present", num(lp["present"]))
    table.add_row("logprobs absent (server sent none)", num(lp["absent"]))
    table.add_row("logprobs not requested", num(lp["not_requested"]))
    table.add_row("logprob coverage (present / requested)", pct(lp["coverage"]))
    table.add_row(
        "assistant turns with logprobs", f"{lp['turns_with_logprobs']}/{lp['assistant_turns']}"
    )
    table.add_row("token-id coverage (model requests with ids)", pct(lp["token_id_coverage"]))
    table.add_row(
        "model requests with token ids", f"{lp['requests_with_token_ids']}/{lp['model_requests']}"
    )
    return table


def _problems(data: dict[str, Any]) -> Table:
    rows = list(data["problems"].items())
    table = text_table(title="Per problem (hardest first)", title_justify="left")
    table.add_column("problem", no_wrap=True)
    for name in ("traces", "success", "rate"):
        table.add_column(name, justify="right")
    table.add_column("")
    table.add_column("mean score", justify="right")
    for pid, row in rows[:MAX_PROBLEM_ROWS]:
        rate = row["success_rate"]
        table.add_row(
            untrusted(pid),
            num(row["traces"]),
            num(row["success"]),
            pct(rate),
            rate_bar(rate),
            num(row["mean_score"]),
        )
    if len(rows) > MAX_PROBLEM_ROWS:
        table.caption = f"… {len(rows) - MAX_PROBLEM_ROWS} more problems (--json lists all)"
    return table


def _pass_at_k(data: dict[str, Any]) -> Table:
    runs = data["pass_at_k_by_mode_model"]
    ks = sorted({k for run in runs for k in run["pass_at_k"]} | set(data["pass_at_k"]), key=int)
    table = text_table(
        title="pass@k (unbiased estimator, mean over problems)", title_justify="left"
    )
    for name in ("mode", "model"):
        table.add_column(name, style="bold", no_wrap=True)
    table.add_column("problems", justify="right")
    table.add_column("samples", justify="right")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    for run in runs:
        row: list[RenderableType] = [
            untrusted(run["mode"]),
            untrusted(run["model"]),
            num(run["problems"]),
            num(run["samples_per_problem"]),
        ]
        table.add_row(*row, *(pct(run["pass_at_k"].get(k)) for k in ks))
    if len(runs) > 1:
        overall = ("all", "", "", "", *(pct(data["pass_at_k"].get(k)) for k in ks))
        table.add_row(*overall, style="italic")
    return table


def _groups(by: dict[str, Any]) -> Table:
    table = text_table(title=f"By {by['key']}", title_justify="left")
    table.add_column(by["key"], style="bold", no_wrap=True)
    columns = ("traces", "success", "pass@1", "ideal", "failed", "score", "turns", "tokens")
    for name in (*columns, "secs"):
        table.add_column(name, justify="right")
    for key, g in by["groups"].items():
        mean = g["mean"]
        table.add_row(
            untrusted(key),
            num(g["traces"]),
            pct(g["success_rate"]),
            pct(g["pass_at_k"].get("1")),
            pct(g["ideal_rate"]),
            num(g["failed_episodes"]),
            num(mean["score"]),
            num(mean["turns"]),
            num(mean["completion_tokens"]),
            num(mean["latency_s"]),
        )
    return table


def print_stats(
    data: dict[str, Any],
    distributions: Mapping[str, Counter[float]],
    console: Console | None = None,
) -> None:
    """Print every table of ``data`` (`Stats.to_json`); ``distributions`` are the value
    counts its histograms are drawn from."""
    if console is None:
        console = safe_console(highlight=False)
        if not console.is_terminal:
            console.width = PIPE_WIDTH
    console.print(_summary(data))
    console.print(_distributions(data, distributions))
    console.print(_tools(data))
    console.print(_problems(data))
    if data["pass_at_k_by_mode_model"]:
        console.print(_pass_at_k(data))
    if "by" in data:
        console.print(_groups(data["by"]))
