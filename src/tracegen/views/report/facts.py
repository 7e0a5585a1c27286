"""What `tracegen report` counts beyond `tracegen stats`, in one streaming pass.

Each line is decoded with msgspec into a struct holding only the fields counted here (the
conversation, steps and most of each logprob entry are skipped without building objects).
A line that does not decode, or is not a trace, is skipped: `stats` reports and counts it.
Besides the counts, the pass keeps a uniform sample of line positions (file, byte offset)
per (mode, outcome), so the page can embed a bounded sample of traces for browsing.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import msgspec

from tracegen.jsonl import iter_raw_lines_at
from tracegen.schema import TRACE_SCHEMA

OUTCOMES = ("ideal", "success", "failed", "error")
MAX_TURN = 12
Position = tuple[int, int]


class _Token(msgspec.Struct):
    logprob: float = 0.0
    id: int | None = None


class _Turn(msgspec.Struct):
    tokens: list[_Token] = []


class _Error(msgspec.Struct):
    kind: str = "?"
    reason: str = "?"


class _Verdict(msgspec.Struct):
    status: str = "?"


class _Line(msgspec.Struct):
    schema: str = ""
    mode: str = ""
    model: str = ""
    success: bool = False
    is_ideal: bool = False
    reward: float = 0.0
    verdict: _Verdict | None = None
    error: _Error | None = None
    logprobs: list[_Turn] = []
    token_requests: list[msgspec.Raw] = []


_DECODER = msgspec.json.Decoder(_Line)
_LOGPROB = attrgetter("logprob")
_ID = attrgetter("id")


def outcome(success: bool, ideal: bool, errored: bool) -> str:
    """One of `OUTCOMES`: an episode error, failed tests, success, or ideal."""
    if errored:
        return "error"
    if ideal:
        return "ideal"
    return "success" if success else "failed"


def failure_kind(success: bool, error: tuple[str, str] | None, status: str | None) -> str:
    """``kind/reason`` of an episode error, ``tests/<status>`` of failing code, else ``""``."""
    if error is not None:
        return f"{error[0]}/{error[1]}"
    if success:
        return ""
    return f"tests/{status}" if status else "tests/no-verdict"


@dataclass
class Rates:
    traces: int = 0
    success: int = 0
    ideal: int = 0

    def add(self, success: bool, ideal: bool) -> None:
        self.traces += 1
        self.success += success
        self.ideal += ideal


@dataclass
class Reservoir:
    """A uniform sample of at most ``size`` positions out of ``seen`` (Algorithm R)."""

    size: int
    seen: int = 0
    kept: list[Position] = field(default_factory=list)

    def offer(self, position: Position, rng: random.Random) -> None:
        self.seen += 1
        if len(self.kept) < self.size:
            self.kept.append(position)
            return
        slot = rng.randrange(self.seen)
        if slot < self.size:
            self.kept[slot] = position


@dataclass
class ReportFacts:
    """Counts the plots need that `Stats` does not keep, and the browsing sample's positions."""

    sample_size: int
    traces: int = 0
    by_mode: dict[str, Rates] = field(default_factory=lambda: defaultdict(Rates))
    by_model: dict[str, Rates] = field(default_factory=lambda: defaultdict(Rates))
    reward: Counter[float] = field(default_factory=Counter)
    failure_kinds: Counter[str] = field(default_factory=Counter)
    turn_logprob_sum: Counter[int] = field(default_factory=Counter)
    turn_tokens: Counter[int] = field(default_factory=Counter)
    turns_by_index: Counter[int] = field(default_factory=Counter)
    tokens: int = 0
    tokens_with_id: int = 0
    traces_with_token_requests: int = 0
    strata: dict[tuple[str, str], Reservoir] = field(default_factory=dict)

    def add(self, line: _Line, position: Position, rng: random.Random) -> None:
        self.traces += 1
        self.by_mode[line.mode].add(line.success, line.is_ideal)
        self.by_model[line.model].add(line.success, line.is_ideal)
        self.reward[round(line.reward, 3)] += 1
        error = (line.error.kind, line.error.reason) if line.error else None
        status = line.verdict.status if line.verdict else None
        kind = failure_kind(line.success, error, status)
        if kind:
            self.failure_kinds[kind] += 1
        self.traces_with_token_requests += bool(line.token_requests)
        for index, turn in enumerate(line.logprobs):
            tokens = turn.tokens
            self.tokens += len(tokens)
            self.tokens_with_id += len(tokens) - list(map(_ID, tokens)).count(None)
            if index < MAX_TURN:
                self.turns_by_index[index] += 1
                self.turn_tokens[index] += len(tokens)
                self.turn_logprob_sum[index] += sum(map(_LOGPROB, tokens))
        key = (line.mode, outcome(line.success, line.is_ideal, line.error is not None))
        reservoir = self.strata.get(key)
        if reservoir is None:
            reservoir = self.strata[key] = Reservoir(self.sample_size)
        reservoir.offer(position, rng)

    def mean_logprob_by_turn(self) -> list[tuple[int, float, int]]:
        """(turn number from 1, mean token logprob, turns counted) for each turn index."""
        return [
            (i + 1, self.turn_logprob_sum[i] / self.turn_tokens[i], self.turns_by_index[i])
            for i in sorted(self.turns_by_index)
            if self.turn_tokens[i]
        ]

    def sample_positions(self, rng: random.Random) -> list[Position]:
        """At most ``sample_size`` positions, shared fairly among the (mode, outcome) strata:
        each gets an equal share, and what a small stratum cannot use goes to the others."""
        left = self.sample_size
        pools = sorted(self.strata.values(), key=lambda r: len(r.kept))
        chosen: list[Position] = []
        for n, reservoir in enumerate(pools):
            share = min(left // (len(pools) - n), len(reservoir.kept))
            chosen += rng.sample(reservoir.kept, share)
            left -= share
        return sorted(chosen)


def collect_facts(paths: list[Path], sample_size: int, seed: int = 0) -> ReportFacts:
    """Read every line of ``paths`` once and count what the report adds to `stats`."""
    facts = ReportFacts(sample_size=sample_size)
    rng = random.Random(seed)
    for file_index, path in enumerate(paths):
        for _, offset, raw in iter_raw_lines_at(path):
            try:
                line = _DECODER.decode(raw)
            except msgspec.DecodeError:
                continue
            if line.schema == TRACE_SCHEMA:
                facts.add(line, (file_index, offset), rng)
    return facts
