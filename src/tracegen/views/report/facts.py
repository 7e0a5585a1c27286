"""What `tracegen report` counts beyond `tracegen stats`, in the same streaming pass.

Each trace is read as `ReportLine`, `stats`' struct with the few fields more that the
report counts; logprobs, most of a file's bytes, are only read for a share of the traces
that carry them, drawn by a hash of their position (all of them when the files are smaller
than `LOGPROB_BYTES`): the mean token logprob per turn and the share of tokens with an id
are counted over their tokens. The pass also keeps, per (mode, outcome), a bounded uniform
sample of line positions (file, byte offset) for the page's trace browser: the positions
of smallest hash. Both are the same however the files were cut among processes.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from hashlib import blake2b
from operator import attrgetter

import msgspec

from tracegen.views.stats import Position, TraceFacts, VerdictFacts

OUTCOMES = ("ideal", "success", "failed", "error")
MAX_TURN = 12
LOGPROB_BYTES = 50_000_000
"""Files larger than this have the tokens of only this share of their traces counted."""
HASHES = 1 << 64


class _Verdict(VerdictFacts, gc=False):
    status: str = "?"


class ReportLine(TraceFacts, gc=False):
    """`TraceFacts` and what the report counts besides."""

    reward: float = 0.0
    verdict: _Verdict | None = None


class _Token(msgspec.Struct, gc=False):
    logprob: float = 0.0
    id: int | None = None


class _Turn(msgspec.Struct, gc=False):
    tokens: list[_Token] = []


_TURN = msgspec.json.Decoder(_Turn)
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

    def merge(self, other: Rates) -> None:
        self.traces += other.traces
        self.success += other.success
        self.ideal += other.ideal


def logprob_cut(total_bytes: int) -> int:
    """The hashes of the positions whose logprobs are counted are below this."""
    return HASHES if total_bytes <= LOGPROB_BYTES else HASHES * LOGPROB_BYTES // total_bytes


def _key(position: Position) -> int:
    return int.from_bytes(blake2b(b"%d:%d" % position, digest_size=8).digest())


@dataclass
class Sample:
    """A uniform sample of at most ``size`` positions out of ``seen``: those whose hash is
    smallest, kept as a heap of ``(-hash, position)``."""

    size: int
    seen: int = 0
    heap: list[tuple[int, Position]] = field(default_factory=list)

    def offer(self, position: Position) -> None:
        self.seen += 1
        self._keep(-_key(position), position)

    def _keep(self, key: int, position: Position) -> None:
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, (key, position))
        elif self.heap and key > self.heap[0][0]:
            heapq.heapreplace(self.heap, (key, position))

    def merge(self, other: Sample) -> None:
        self.seen += other.seen
        for key, position in other.heap:
            self._keep(key, position)

    @property
    def kept(self) -> list[Position]:
        return sorted(position for _, position in self.heap)


@dataclass
class ReportFacts:
    """Counts the plots need that `Stats` does not keep, and the browsing sample's positions."""

    sample_size: int
    logprob_cut: int = HASHES
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
    logprob_traces: int = 0
    logprob_traces_read: int = 0
    strata: dict[tuple[str, str], Sample] = field(default_factory=dict)

    def add(self, line: ReportLine, position: Position) -> None:
        self.traces += 1
        self.by_mode[line.mode].add(line.success, line.is_ideal)
        self.by_model[line.model].add(line.success, line.is_ideal)
        self.reward[round(line.reward, 3)] += 1
        error = (line.error.kind, line.error.reason) if line.error else None
        # A program's named outcome (wrong, time, memory...) says more than its status.
        status = (line.verdict.outcome or line.verdict.status) if line.verdict else None
        kind = failure_kind(line.success, error, status)
        if kind:
            self.failure_kinds[kind] += 1
        self.traces_with_token_requests += bool(line.token_requests)
        if line.logprobs:
            self.logprob_traces += 1
            if _key(position) < self.logprob_cut:
                self.logprob_traces_read += 1
                self._count_tokens(line.logprobs)
        key = (line.mode, outcome(line.success, line.is_ideal, line.error is not None))
        stratum = self.strata.get(key)
        if stratum is None:
            stratum = self.strata[key] = Sample(self.sample_size)
        stratum.offer(position)

    def merge(self, other: ReportFacts) -> None:
        """Add the counts of ``other``, a later part of the same files."""
        self.traces += other.traces
        for mine, theirs in ((self.by_mode, other.by_mode), (self.by_model, other.by_model)):
            for name, rates in theirs.items():
                mine[name].merge(rates)
        self.reward.update(other.reward)
        self.failure_kinds.update(other.failure_kinds)
        self.traces_with_token_requests += other.traces_with_token_requests
        self.logprob_traces += other.logprob_traces
        self.logprob_traces_read += other.logprob_traces_read
        self.tokens += other.tokens
        self.tokens_with_id += other.tokens_with_id
        self.turn_logprob_sum.update(other.turn_logprob_sum)
        self.turn_tokens.update(other.turn_tokens)
        self.turns_by_index.update(other.turns_by_index)
        for key, stratum in other.strata.items():
            self.strata.setdefault(key, Sample(self.sample_size)).merge(stratum)

    def _count_tokens(self, turns: list[msgspec.Raw]) -> None:
        for index, raw in enumerate(turns):
            try:
                tokens = _TURN.decode(raw).tokens
            except msgspec.DecodeError:  # a trace for stats, with logprobs not worth a crash
                continue
            self.tokens += len(tokens)
            self.tokens_with_id += len(tokens) - list(map(_ID, tokens)).count(None)
            if index < MAX_TURN:
                self.turns_by_index[index] += 1
                self.turn_tokens[index] += len(tokens)
                self.turn_logprob_sum[index] += sum(map(_LOGPROB, tokens))

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
        pools = sorted((s.kept for s in self.strata.values()), key=lambda kept: (len(kept), kept))
        chosen: list[Position] = []
        for n, kept in enumerate(pools):
            share = min(left // (len(pools) - n), len(kept))
            chosen += rng.sample(kept, share)
            left -= share
        return sorted(chosen)
