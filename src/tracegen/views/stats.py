"""`tracegen stats`: one streaming pass over trace files, then tables or one JSON object.

Each line is decoded straight into `TraceFacts`, a msgspec struct of the few fields stats
uses (logprobs, most of a trace's bytes, are counted, never built), a block of lines at a
time. A line that is not a trace (bad JSON, a missing field, a count that is not a whole
number in 0..2⁶³-1, a score outside [0, 1], a number JSON cannot hold) is reported with
FILE:LINE and counted, never a crash.

Large files are cut into spans of `SPAN_BYTES` on line boundaries; each span is counted on
its own (in parallel on every core when there are several) and the counts are merged in
file order, so the result does not depend on how many processes did the work. A caller may
count more in the same pass (`collect_with`: `tracegen report`), from a struct that extends
`TraceFacts`, with each line's position. Distributions are kept as value counts (latency
rounded to the millisecond), so memory stays flat as files grow; median and p90 interpolate
linearly between closest ranks, like ``numpy.quantile``.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import itertools
import math
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, Self, TypeVar, cast

import msgspec

from tracegen.cores import usable_cores
from tracegen.errors import ConfigError, InputFileError, JsonlError
from tracegen.jsonl import iter_struct_blocks, line_spans
from tracegen.terminal import json_bytes, one_line
from tracegen.views.breakdowns import BY_KEYS
from tracegen.views.pass_at_k import pass_at_k

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
SPAN_BYTES = 32 << 20
"""Files are counted in spans of about this many bytes (the unit of parallel work)."""

Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]


class MetricFacts(msgspec.Struct, gc=False):
    """The counters of a trace's ``metrics`` that stats reads."""

    think_segments: Count = 0
    code_blocks: Count = 0
    executions: Count = 0
    tool_calls: Count = 0
    turns: Count = 0
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    latency_s: Seconds = 0.0
    parse_failures: Count = 0
    hallucinated_results: Count = 0
    exec_timeouts: Count = 0
    repetition_stops: Count = 0
    parse_strategies: dict[str, Count] = {}


class ErrorFacts(msgspec.Struct, gc=False):
    reason: str
    kind: str = "?"


class Role(msgspec.Struct, gc=False):
    role: str


class UsageFacts(msgspec.Struct, gc=False):
    requests: Count = 0


class TestOutcomeFacts(msgspec.Struct, gc=False):
    outcome: str | None = None


class VerdictFacts(msgspec.Struct, gc=False):
    outcome: str | None = None
    tests: list[TestOutcomeFacts] | None = None


class TraceFacts(msgspec.Struct, gc=False):
    """What stats needs from one trace line; every other field is skipped unread."""

    # `tracegen.schema.TRACE_SCHEMA`, written out: importing the schema imports pydantic.
    schema: Literal["tracegen.trace/1"]
    id: str
    problem_id: str
    mode: str
    model: str
    score: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    success: bool = False
    is_ideal: bool = False
    metrics: MetricFacts | None = None
    error: ErrorFacts | None = None
    logprobs_status: Literal["present", "absent", "not_requested"] = "not_requested"
    messages: list[Role] | None = None
    logprobs: list[msgspec.Raw] | None = None
    usage: UsageFacts | None = None
    token_requests: list[msgspec.Raw] | None = None
    verdict: VerdictFacts | None = None


Cell = tuple[str, str, str]
"""(mode, model, problem id): the samples pass@k is estimated from."""
_CELL_PLACE = {"mode": 0, "model": 1, "problem": 2}

TRACE_NAME = "tracegen.trace/1 record"
DECODER = msgspec.json.Decoder(TraceFacts)
Position = tuple[int, int]
"""A line's file (its index among the files read) and byte offset."""


class Tally(Protocol):
    """What a caller counts beside `Stats` in the same pass, a span at a time."""

    def add(self, facts: Any, position: Position) -> None: ...

    def merge(self, other: Self) -> None: ...


T = TypeVar("T", bound=Tally)


@cache
def _decoder(line: type[TraceFacts]) -> msgspec.json.Decoder[TraceFacts]:
    return DECODER if line is TraceFacts else msgspec.json.Decoder(line)


_NO_METRICS = MetricFacts()
_METRIC_VALUES = attrgetter(*METRICS)
_COUNTED_VALUES = attrgetter(*COUNTED)
_COLUMNS_OF = attrgetter(
    "metrics",
    "score",
    "success",
    "is_ideal",
    "error",
    "problem_id",
    "mode",
    "model",
    "logprobs_status",
    "verdict",
    "messages",
    "logprobs",
    "usage",
    "token_requests",
)
"""A trace's fields as `Stats.add_all` reads them: a block's columns in one pass."""
_METRIC_COLUMNS_OF = attrgetter(*METRICS, *COUNTED, "parse_strategies")
_BY_OF = {key: attrgetter(name) for key, name in BY_KEYS.items()}
_ROLE_OF = attrgetter("role")
_REQUESTS_OF = attrgetter("requests")
_OUTCOME_OF = attrgetter("outcome")
_TESTS_OF = attrgetter("tests")


def _whole(column: Sequence[Any]) -> Sequence[Any]:
    return column


@dataclass
class _Rows:
    """The columns of a block of traces that every `Group` sums, one entry per trace."""

    success: Sequence[bool]
    ideal: Sequence[bool]
    errors: Sequence[ErrorFacts | None]
    columns: list[Sequence[float]]
    """``score`` and each of `METRICS`, in `DISTRIBUTIONS`' order."""


@dataclass
class Group:
    """Running totals for one mode, model or problem."""

    traces: int = 0
    success: int = 0
    ideal: int = 0
    failed: int = 0
    sums: list[float] = field(default_factory=lambda: [0.0] * len(DISTRIBUTIONS))

    def add(self, facts: TraceFacts, values: tuple[float, ...]) -> None:
        self.traces += 1
        self.success += facts.success
        self.ideal += facts.is_ideal
        self.failed += facts.error is not None
        self.sums = [total + value for total, value in zip(self.sums, values, strict=True)]

    def add_columns(self, rows: _Rows, indexes: list[int] | None) -> None:
        """`add` for the traces of a block (those at ``indexes``, or all), column by column."""
        if indexes is None:
            pick: Callable[[Sequence[Any]], Sequence[Any]] = _whole
        elif len(indexes) == 1:
            one = indexes[0]
            pick = lambda column: (column[one],)  # noqa: E731
        else:
            pick = itemgetter(*indexes)
        errors = pick(rows.errors)
        self.traces += len(errors)
        self.success += sum(pick(rows.success))
        self.ideal += sum(pick(rows.ideal))
        self.failed += len(errors) - errors.count(None)
        self.sums = [
            total + sum(pick(column)) for total, column in zip(self.sums, rows.columns, strict=True)
        ]

    def merge(self, other: Group) -> None:
        self.traces += other.traces
        self.success += other.success
        self.ideal += other.ideal
        self.failed += other.failed
        self.sums = [a + b for a, b in zip(self.sums, other.sums, strict=True)]

    def summary(self) -> dict[str, Any]:
        mean = {
            name: _ratio(total, self.traces)
            for name, total in zip(DISTRIBUTIONS, self.sums, strict=True)
        }
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
class ProblemTally:
    """Running totals for one problem: what its row of the problems table shows."""

    traces: int = 0
    success: int = 0
    score: float = 0.0

    def merge(self, other: ProblemTally) -> None:
        self.traces += other.traces
        self.success += other.success
        self.score += other.score


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
    outcomes: Counter[str] = field(default_factory=Counter)
    """Program problems: verdicts by outcome (``accepted``, ``wrong``, ``time``...)."""
    test_outcomes: Counter[str] = field(default_factory=Counter)
    """Program problems: their tests by outcome."""
    assistant_turns: int = 0
    turns_with_logprobs: int = 0
    model_requests: int = 0
    requests_with_token_ids: int = 0
    problems: dict[str, ProblemTally] = field(default_factory=lambda: defaultdict(ProblemTally))
    groups: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))
    sampled: Counter[Cell] = field(default_factory=Counter)
    """Samples per (mode, model, problem): what pass@k is estimated from, with `won`."""
    won: Counter[Cell] = field(default_factory=Counter)
    """Successful samples per (mode, model, problem)."""

    @property
    def samples(self) -> dict[Cell, tuple[int, int]]:
        """(samples, successes) per (mode, model, problem), in the order first seen."""
        won = self.won
        return {cell: (n, won[cell]) for cell, n in self.sampled.items()}

    def add(self, facts: TraceFacts) -> None:
        metrics = facts.metrics or _NO_METRICS
        values = (facts.score, *_METRIC_VALUES(metrics))
        self.total.add(facts, values)
        problem = self.problems[facts.problem_id]
        problem.traces += 1
        problem.success += facts.success
        problem.score = problem.score + facts.score
        cell = (facts.mode, facts.model, facts.problem_id)
        self.sampled[cell] += 1
        if facts.success:
            self.won[cell] += 1
        if self.by is not None:
            self.groups[getattr(facts, BY_KEYS[self.by])].add(facts, values)
        if facts.error is not None:
            self.failures[f"{facts.error.kind}/{facts.error.reason}"] += 1
        *rest, latency = values
        for counts, value in zip(
            self.distributions.values(), (*rest, round(latency, 3)), strict=True
        ):
            counts[value] += 1
        for name, value in zip(COUNTED, _COUNTED_VALUES(metrics), strict=True):
            self.counted[name] += value
        self.traces_with_hallucinations += metrics.hallucinated_results > 0
        for strategy, n in metrics.parse_strategies.items():
            self.strategies[strategy] += n
        self.logprobs[facts.logprobs_status] += 1
        self._count_outcomes(facts.verdict)
        self.assistant_turns += sum(m.role == "assistant" for m in facts.messages or ())
        self.turns_with_logprobs += len(facts.logprobs or ())
        self.model_requests += facts.usage.requests if facts.usage else 0
        self.requests_with_token_ids += len(facts.token_requests or ())

    def add_all(self, items: list[TraceFacts]) -> None:
        """`add` for every trace of ``items`` (a block of lines), counted column by column:
        the block's columns are read off it in one pass (`_COLUMNS_OF`) and counted by
        builtins, so no Python code runs per line (the totals are the same, summed in the
        same order)."""
        if not items:
            return
        (
            metrics,
            scores,
            success,
            ideal,
            errors,
            problem_ids,
            modes,
            models,
            statuses,
            verdicts,
            messages,
            logprobs,
            usages,
            token_requests,
        ) = zip(*map(_COLUMNS_OF, items), strict=True)
        if None in metrics:
            metrics = tuple(m or _NO_METRICS for m in metrics)
        *values, strategies = zip(*map(_METRIC_COLUMNS_OF, metrics), strict=True)
        columns: list[Sequence[float]] = [scores, *values[: len(METRICS)]]
        rows = _Rows(success, ideal, errors, columns)
        self.total.add_columns(rows, None)
        self._add_problems(problem_ids, scores, success)
        if self.by is not None:
            keys = {"mode": modes, "model": models, "problem": problem_ids}[self.by]
            self._add_groups(self.groups, keys, rows)
        cells = list(zip(modes, models, problem_ids, strict=True))
        self.sampled.update(cells)
        self.won.update(compress(cells, success))
        if len(errors) != errors.count(None):
            self.failures.update(f"{e.kind}/{e.reason}" for e in errors if e is not None)
        for counts, column in zip(self.distributions.values(), columns[:-1], strict=False):
            counts.update(column)
        self.distributions[DISTRIBUTIONS[-1]].update(map(round, columns[-1], repeat(3)))
        for name, counted in zip(COUNTED, values[len(METRICS) :], strict=True):
            self.counted[name] += sum(counted)
        hallucinated = values[len(METRICS) + COUNTED.index("hallucinated_results")]
        self.traces_with_hallucinations += len(hallucinated) - hallucinated.count(0)
        tallied = self.strategies
        for strategy, n in chain.from_iterable(map(dict.items, filter(None, strategies))):
            tallied[strategy] += n
        self.logprobs.update(statuses)
        programs = [v for v in filter(None, verdicts) if v.outcome is not None]
        if programs:
            self.outcomes.update(map(_OUTCOME_OF, programs))
            tests = chain.from_iterable(filter(None, map(_TESTS_OF, programs)))
            self.test_outcomes.update(o for o in map(_OUTCOME_OF, tests) if o is not None)
        roles = Counter(map(_ROLE_OF, chain.from_iterable(filter(None, messages))))
        self.assistant_turns += roles["assistant"]
        self.turns_with_logprobs += sum(map(len, filter(None, logprobs)))
        self.model_requests += sum(map(_REQUESTS_OF, filter(None, usages)))
        self.requests_with_token_ids += sum(map(len, filter(None, token_requests)))

    def _count_outcomes(self, verdict: VerdictFacts | None) -> None:
        """A program problem's verdict and tests, by outcome (other verdicts have none)."""
        if verdict is not None and verdict.outcome is not None:
            self.outcomes[verdict.outcome] += 1
            for test in verdict.tests or ():
                if test.outcome is not None:
                    self.test_outcomes[test.outcome] += 1

    def _add_problems(
        self, problem_ids: Sequence[str], scores: Sequence[float], success: Sequence[bool]
    ) -> None:
        """Each problem's traces, successes and scores of a block: its scores summed in
        order, then added to its total (as `Group.add_columns` sums a column)."""
        at: dict[str, list[float]] = defaultdict(list)
        for key, score in zip(problem_ids, scores, strict=True):
            at[key].append(score)
        won = Counter(compress(problem_ids, success))
        problems = self.problems
        for key, block in at.items():
            tally = problems[key]
            tally.traces += len(block)
            tally.success += won[key]
            tally.score = tally.score + sum(block)

    @staticmethod
    def _add_groups(groups: dict[str, Group], keys: Sequence[str], rows: _Rows) -> None:
        at: dict[str, list[int]] = defaultdict(list)
        for i, key in enumerate(keys):
            at[key].append(i)
        for key, indexes in at.items():
            groups[key].add_columns(rows, indexes)

    def merge(self, other: Stats) -> None:
        """Add the counts of ``other`` (of lines read after these)."""
        self.malformed += other.malformed
        self.total.merge(other.total)
        for key, tally in other.problems.items():
            self.problems[key].merge(tally)
        for key, group in other.groups.items():
            self.groups[key].merge(group)
        self.failures.update(other.failures)
        self.sampled.update(other.sampled)
        self.won.update(other.won)
        for name, counts in other.distributions.items():
            self.distributions[name].update(counts)
        self.counted.update(other.counted)
        self.traces_with_hallucinations += other.traces_with_hallucinations
        self.strategies.update(other.strategies)
        self.logprobs.update(other.logprobs)
        self.outcomes.update(other.outcomes)
        self.test_outcomes.update(other.test_outcomes)
        self.assistant_turns += other.assistant_turns
        self.turns_with_logprobs += other.turns_with_logprobs
        self.model_requests += other.model_requests
        self.requests_with_token_ids += other.requests_with_token_ids

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
            "pass_at_k": pass_at_k(self.samples.values()),
            "pass_at_k_by_mode_model": self._pass_at_k_by_run(),
        }
        if self.outcomes:  # program problems only: other traces' JSON is unchanged
            out["outcomes"] = dict(self.outcomes.most_common())
            out["test_outcomes"] = dict(self.test_outcomes.most_common())
        if self.by is not None:
            groups = sorted(self.groups.items())
            out["by"] = {"key": self.by, "groups": {k: g.summary() for k, g in groups}}
            place = _CELL_PLACE[self.by]
            by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for key, (n, c) in self.samples.items():
                by_key[key[place]].append((n, c))
            for name, summary in out["by"]["groups"].items():
                summary["pass_at_k"] = pass_at_k(by_key[name])
        return out

    def _pass_at_k_by_run(self) -> list[dict[str, Any]]:
        """pass@k per (mode, model), with its problems and the fewest samples of one."""
        runs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        for (mode, model, _), (n, c) in self.samples.items():
            runs[(mode, model)].append((n, c))
        return [
            {
                "mode": mode,
                "model": model,
                "problems": len(cells),
                "samples_per_problem": min(n for n, _ in cells),
                "pass_at_k": pass_at_k(cells),
            }
            for (mode, model), cells in sorted(runs.items())
        ]


def _problem_row(group: ProblemTally) -> dict[str, Any]:
    return {
        "traces": group.traces,
        "success": group.success,
        "success_rate": _ratio(group.success, group.traces),
        "mean_score": _ratio(group.score, group.traces),
    }


def _rate(group: Group | ProblemTally) -> float:
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


@dataclass
class _Part:
    """The counts of one span of a file, with the first bad lines (numbered within it)."""

    stats: Stats
    tally: Tally | None = None
    lines: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Job:
    """How to count a span: the same for every span of a pass."""

    by: str | None
    strict: bool
    line: type[TraceFacts] = TraceFacts
    tally: Callable[[], Tally] | None = None


class _Stop(Exception):
    """The first bad line of a span read with --strict: no need to read on."""


@contextlib.contextmanager
def _no_cycle_collection() -> Generator[None, None, None]:
    """Python's cycle collector paused: a block's lists of decoded structs form no cycles
    (each is freed by its reference count), but their number alone set off collections that
    walked every one of them, as much CPU as the decoding on small lines."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _count_span(file: int, path: Path, span: tuple[int, int | None], job: _Job) -> _Part:
    part = _Part(Stats(by=job.by), job.tally() if job.tally else None)

    def bad_line(lineno: int, reason: str) -> None:
        part.stats.malformed += 1
        if len(part.bad) < MAX_REPORTED:
            part.bad.append((lineno, reason))
        if job.strict:
            raise _Stop

    add_all, tally = part.stats.add_all, part.tally
    decoder = _decoder(job.line)
    blocks = iter_struct_blocks(
        path, decoder, on_error=bad_line, name=TRACE_NAME, span=span, offsets=tally is not None
    )
    with _no_cycle_collection(), contextlib.suppress(_Stop):
        for block in blocks:
            add_all(block.items)
            if tally is not None:
                for facts, offset in zip(block.items, block.offsets, strict=True):
                    tally.add(facts, (file, offset))
            part.lines += block.lines
    return part


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _parts(
    spans: list[tuple[int, Path, tuple[int, int | None]]], job: _Job, workers: int
) -> Generator[_Part, None, None]:
    """The counts of each span, in order: here, or on ``workers`` processes."""
    if workers <= 1 or len(spans) <= 1:
        for file, path, span in spans:
            yield _count_span(file, path, span, job)
        return
    # Imported here: a file of one span (most) is counted without them.
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_all_start_methods, get_context

    context = get_context("fork") if "fork" in get_all_start_methods() else None
    pool = ProcessPoolExecutor(
        min(workers, len(spans)), mp_context=context, initializer=_ignore_interrupts
    )
    try:
        yield from pool.map(_count_span, *zip(*spans, strict=True), [job] * len(spans))
    finally:
        pool.shutdown(cancel_futures=True)


def collect(
    paths: list[Path], *, by: str | None = None, strict: bool = False, workers: int | None = None
) -> Stats:
    """Read every line of ``paths`` once and count, on ``workers`` processes (default: one
    per core, when the files are large enough to be cut into several spans). The result is
    the same whatever the number of processes."""
    return _collect(paths, _Job(by, strict), workers)[0]


def collect_with(
    paths: list[Path],
    tally: Callable[[], T],
    line: type[TraceFacts],
    *,
    by: str | None = None,
    strict: bool = False,
    workers: int | None = None,
) -> tuple[Stats, T]:
    """`collect`, and in the same pass a ``tally()`` per span of every trace read as ``line``
    (`TraceFacts` or a struct extending it), merged in file order."""
    stats, counted = _collect(paths, _Job(by, strict, line, tally), workers)
    return stats, cast(T, counted)


def _collect(paths: list[Path], job: _Job, workers: int | None) -> tuple[Stats, Tally | None]:
    by, strict = job.by, job.strict
    if by is not None and by not in BY_KEYS:
        raise ConfigError(f"--by: expected one of {', '.join(BY_KEYS)}, got {by!r}")
    stats = Stats(by=by, files=[str(p) for p in paths])
    tally = job.tally() if job.tally else None
    spans = [line_spans(path, SPAN_BYTES) for path in paths]
    jobs = [
        (file, path, span)
        for file, (path, cuts) in enumerate(zip(paths, spans, strict=True))
        for span in cuts
    ]
    workers = usable_cores() if workers is None else workers
    reported = 0
    with contextlib.closing(_parts(jobs, job, workers)) as parts:
        for path, cuts in zip(paths, spans, strict=True):
            before = 0
            for part in itertools.islice(parts, len(cuts)):
                for lineno, reason in part.bad:
                    err = JsonlError(f"{path}:{before + lineno}: {reason}")
                    if strict:
                        raise err
                    if reported < MAX_REPORTED:
                        print(f"tracegen: warning: {one_line(str(err))}", file=sys.stderr)
                        reported += 1
                before += part.lines
                stats.merge(part.stats)
                if tally is not None and part.tally is not None:
                    tally.merge(part.tally)
    hidden = stats.malformed - reported
    if hidden > 0:
        print(f"tracegen: warning: … and {hidden} more malformed lines", file=sys.stderr)
    if stats.total.traces == 0 and stats.malformed == 0:
        raise InputFileError(f"{', '.join(map(str, paths))}: holds no traces")
    return stats, tally


def stats_command(
    *, files: list[str], json_out: bool = False, by: str | None = None, strict: bool = False
) -> None:
    """Print the statistics of ``files`` as tables, or as one JSON object with ``--json``."""
    stats = collect(expand_files(files), by=by, strict=strict)
    data = stats.to_json()
    if json_out:
        # msgspec writes integers of any size: counts summed over many lines may pass 2⁶⁴.
        text = msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n"
        sys.stdout.buffer.write(json_bytes(text))
        sys.stdout.buffer.flush()
        return
    from tracegen.views.stats_table import print_stats

    print_stats(data, stats.distributions)
