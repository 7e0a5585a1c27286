"""`tracegen stats`: one streaming pass over trace files, then tables or one JSON object.

Lines are read as plain orjson dicts (validating each with pydantic would be several times
slower); the fields stats uses are checked by hand, so a line that is not a trace is
reported with FILE:LINE and counted, never a crash. Distributions are kept as value
counts (latency rounded to the millisecond), so memory stays flat as files grow;
median and p90 interpolate linearly between closest ranks, like ``numpy.quantile``.
"""

from __future__ import annotations

import glob
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegen.errors import ConfigError, InputFileError, JsonlError
from tracegen.jsonl import iter_lines
from tracegen.schema import TRACE_SCHEMA

BY_KEYS = {"mode": "mode", "model": "model", "problem": "problem_id"}
METRICS = (
    "think_segments",
    "code_blocks",
    "executions",
    "tool_calls",
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
)
DISTRIBUTIONS = ("score", *METRICS)
COUNTED = ("parse_failures", "hallucinated_results", "exec_timeouts", "repetition_stops")
LOGPROBS_STATUSES = ("present", "absent", "not_requested")
MAX_REPORTED = 20


class NotATrace(ValueError):
    """A JSON object that is not a tracegen trace; the message says why."""


def _number(obj: dict[str, Any], key: str, where: str = "") -> float:
    value = obj.get(key, 0)
    if type(value) is int or type(value) is float:
        return value
    raise NotATrace(f"{where}{key}: expected a number, got {type(value).__name__}")


def _string(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if type(value) is not str:
        raise NotATrace(f"{key}: missing or not a string")
    return value


def _flag(obj: dict[str, Any], key: str) -> bool:
    value = obj.get(key, False)
    if type(value) is not bool:
        raise NotATrace(f"{key}: expected true or false")
    return value


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key) or {}
    if type(value) is not dict:
        raise NotATrace(f"{key}: expected an object")
    return value


def _list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key) or []
    if type(value) is not list:
        raise NotATrace(f"{key}: expected a list")
    return value


@dataclass
class TraceFacts:
    """What stats needs from one trace line."""

    keys: dict[str, str]
    success: bool
    ideal: bool
    failure: str | None
    values: dict[str, float]
    counted: dict[str, float]
    strategies: dict[str, Any]
    logprobs_status: str
    assistant_turns: int
    turns_with_logprobs: int
    model_requests: float = 0
    requests_with_token_ids: int = 0


def read_trace(obj: dict[str, Any]) -> TraceFacts:
    """The facts of one trace object; `NotATrace` if it is not one."""
    schema = obj.get("schema")
    if schema != TRACE_SCHEMA:
        raise NotATrace(f"not a {TRACE_SCHEMA} record (schema: {schema!r})")
    keys = {"mode": _string(obj, "mode"), "model": _string(obj, "model")}
    keys["problem_id"] = _string(obj, "problem_id")
    _string(obj, "id")
    metrics = _dict(obj, "metrics")
    values = {name: _number(metrics, name, "metrics.") for name in METRICS}
    values["score"] = _number(obj, "score")
    error = obj.get("error")
    if error is not None and (type(error) is not dict or type(error.get("reason")) is not str):
        raise NotATrace("error: expected an object with a reason")
    status = obj.get("logprobs_status", "not_requested")
    if status not in LOGPROBS_STATUSES:
        raise NotATrace(f"logprobs_status: unknown value {status!r}")
    strategies = _dict(metrics, "parse_strategies")
    for name in strategies:
        _number(strategies, name, "metrics.parse_strategies.")
    try:
        assistant_turns = sum(m["role"] == "assistant" for m in _list(obj, "messages"))
    except (TypeError, KeyError):
        raise NotATrace("messages: expected objects with a role") from None
    return TraceFacts(
        keys=keys,
        success=_flag(obj, "success"),
        ideal=_flag(obj, "is_ideal"),
        failure=f"{error.get('kind', '?')}/{error['reason']}" if error else None,
        values=values,
        counted={name: _number(metrics, name, "metrics.") for name in COUNTED},
        strategies=strategies,
        logprobs_status=status,
        assistant_turns=assistant_turns,
        turns_with_logprobs=len(_list(obj, "logprobs")),
        model_requests=_number(_dict(obj, "usage"), "requests", "usage."),
        requests_with_token_ids=len(_list(obj, "token_requests")),
    )


@dataclass
class Group:
    """Running totals for one mode, model or problem."""

    traces: int = 0
    success: int = 0
    ideal: int = 0
    failed: int = 0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DISTRIBUTIONS, 0.0))

    def add(self, facts: TraceFacts) -> None:
        self.traces += 1
        self.success += facts.success
        self.ideal += facts.ideal
        self.failed += facts.failure is not None
        for name, value in facts.values.items():
            self.sums[name] += value

    def summary(self) -> dict[str, Any]:
        mean = {name: _ratio(total, self.traces) for name, total in self.sums.items()}
        return {
            "traces": self.traces,
            "success": self.success,
            "success_rate": _ratio(self.success, self.traces),
            "ideal": self.ideal,
            "ideal_rate": _ratio(self.ideal, self.traces),
            "failed_episodes": self.failed,
            "mean": mean,
        }


@dataclass
class Stats:
    """Everything `tracegen stats` counts, accumulated one trace at a time."""

    by: str | None = None
    files: list[str] = field(default_factory=list)
    malformed: int = 0
    total: Group = field(default_factory=Group)
    failures: Counter[str] = field(default_factory=Counter)
    distributions: dict[str, Counter[float]] = field(
        default_factory=lambda: {name: Counter() for name in DISTRIBUTIONS}
    )
    counted: Counter[str] = field(default_factory=Counter)
    traces_with_hallucinations: int = 0
    strategies: Counter[str] = field(default_factory=Counter)
    logprobs: Counter[str] = field(default_factory=Counter)
    assistant_turns: int = 0
    turns_with_logprobs: int = 0
    model_requests: float = 0
    requests_with_token_ids: int = 0
    problems: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))
    groups: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))

    def add(self, facts: TraceFacts) -> None:
        self.total.add(facts)
        self.problems[facts.keys["problem_id"]].add(facts)
        if self.by is not None:
            self.groups[facts.keys[BY_KEYS[self.by]]].add(facts)
        if facts.failure is not None:
            self.failures[facts.failure] += 1
        for name, value in facts.values.items():
            self.distributions[name][round(value, 3) if name == "latency_s" else value] += 1
        self.counted.update(facts.counted)
        self.traces_with_hallucinations += facts.counted["hallucinated_results"] > 0
        self.strategies.update(facts.strategies)
        self.logprobs[facts.logprobs_status] += 1
        self.assistant_turns += facts.assistant_turns
        self.turns_with_logprobs += facts.turns_with_logprobs
        self.model_requests += facts.model_requests
        self.requests_with_token_ids += facts.requests_with_token_ids

    def to_json(self) -> dict[str, Any]:
        total = self.total
        requested = self.logprobs["present"] + self.logprobs["absent"]
        problems = sorted(self.problems.items(), key=lambda kv: (_rate(kv[1]), kv[0]))
        out: dict[str, Any] = {
            "files": self.files,
            "lines": total.traces + self.malformed,
            "malformed_lines": self.malformed,
            "traces": total.traces,
            "success": total.success,
            "success_rate": _ratio(total.success, total.traces),
            "ideal": total.ideal,
            "ideal_rate": _ratio(total.ideal, total.traces),
            "failed_episodes": total.failed,
            "failed_by_reason": dict(self.failures.most_common()),
            "distributions": {n: describe(c) for n, c in self.distributions.items()},
            "parse_failures": int(self.counted["parse_failures"]),
            "parse_strategies": dict(self.strategies.most_common()),
            "hallucinated_results": int(self.counted["hallucinated_results"]),
            "traces_with_hallucinated_results": self.traces_with_hallucinations,
            "exec_timeouts": int(self.counted["exec_timeouts"]),
            "repetition_stops": int(self.counted["repetition_stops"]),
            "logprobs": {
                **{status: self.logprobs[status] for status in LOGPROBS_STATUSES},
                "coverage": _ratio(self.logprobs["present"], requested),
                "assistant_turns": self.assistant_turns,
                "turns_with_logprobs": self.turns_with_logprobs,
                "model_requests": int(self.model_requests),
                "requests_with_token_ids": self.requests_with_token_ids,
                "token_id_coverage": _ratio(self.requests_with_token_ids, self.model_requests),
            },
            "problems": {pid: _problem_row(g) for pid, g in problems},
        }
        if self.by is not None:
            groups = sorted(self.groups.items())
            out["by"] = {"key": self.by, "groups": {k: g.summary() for k, g in groups}}
        return out


def _problem_row(group: Group) -> dict[str, Any]:
    return {
        "traces": group.traces,
        "success": group.success,
        "success_rate": _ratio(group.success, group.traces),
        "mean_score": _ratio(group.sums["score"], group.traces),
    }


def _rate(group: Group) -> float:
    return group.success / group.traces if group.traces else 0.0


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def quantile(counts: Counter[float], q: float) -> float | None:
    """The ``q`` quantile of the values counted, interpolating like ``numpy.quantile``."""
    n = counts.total()
    if n == 0:
        return None
    rank = (n - 1) * q
    lo, hi = math.floor(rank), math.ceil(rank)
    low = high = None
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if low is None and seen > lo:
            low = value
        if seen > hi:
            high = value
            break
    assert low is not None and high is not None
    return low + (high - low) * (rank - lo)


def describe(counts: Counter[float]) -> dict[str, Any]:
    """n, mean, median, p90, min, max of the values counted."""
    n = counts.total()
    if n == 0:
        return {"n": 0, "mean": None, "median": None, "p90": None, "min": None, "max": None}
    return {
        "n": n,
        "mean": sum(v * c for v, c in counts.items()) / n,
        "median": quantile(counts, 0.5),
        "p90": quantile(counts, 0.9),
        "min": min(counts),
        "max": max(counts),
    }


def expand_files(patterns: Iterable[str]) -> list[Path]:
    """Paths and globs (expanded here, so quoting is safe), each existing, in order, once."""
    seen: dict[Path, None] = {}
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
            matches = [p for p in matches if p.is_file()]
            if not matches:
                raise InputFileError(f"{pattern}: no file matches")
        else:
            path = Path(pattern)
            if not path.exists():
                raise InputFileError(f"{path}: no such file")
            if path.is_dir():
                raise InputFileError(f"{path}: is a directory, not a JSONL file")
            matches = [path]
        seen.update(dict.fromkeys(matches))
    return list(seen)


class _Reporter:
    """Counts bad lines, prints the first few as FILE:LINE on stderr; fatal when strict."""

    def __init__(self, stats: Stats, strict: bool) -> None:
        self.stats = stats
        self.strict = strict

    def __call__(self, err: JsonlError) -> None:
        if self.strict:
            raise err
        self.stats.malformed += 1
        if self.stats.malformed <= MAX_REPORTED:
            print(f"tracegen: warning: {err}", file=sys.stderr)

    def finish(self) -> None:
        hidden = self.stats.malformed - MAX_REPORTED
        if hidden > 0:
            print(f"tracegen: warning: … and {hidden} more malformed lines", file=sys.stderr)


def collect(paths: list[Path], *, by: str | None = None, strict: bool = False) -> Stats:
    """Read every line of ``paths`` once and count."""
    if by is not None and by not in BY_KEYS:
        raise ConfigError(f"--by: expected one of {', '.join(BY_KEYS)}, got {by!r}")
    stats = Stats(by=by, files=[str(p) for p in paths])
    report = _Reporter(stats, strict)
    for path in paths:
        for lineno, obj in iter_lines(path, on_error=report):
            try:
                facts = read_trace(obj)
            except NotATrace as e:
                report(JsonlError(f"{path}:{lineno}: not a trace: {e}"))
                continue
            stats.add(facts)
    report.finish()
    if stats.total.traces == 0 and stats.malformed == 0:
        raise InputFileError(f"{', '.join(map(str, paths))}: holds no traces")
    return stats
