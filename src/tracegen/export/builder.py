"""What every output format of `tracegen convert` is given and reports.

A format turns each trace that passed the filters into records through a `Builder`, opened
once per conversion with the `ConvertOptions` and the `ConvertCounts` it may add to. The
formats themselves are listed in `tracegen.export.registry`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tracegen.schema import Step, Trace

Row = dict[str, Any]
BATCH_ROWS = 100
"""Records converted and written together into Parquet or Arrow (a row group, a record
batch), unless a format says fewer; JSONL alone is written a record at a time."""


@dataclass(frozen=True)
class ConvertOptions:
    """What `tracegen convert` keeps and how it shapes each record; a format refuses the
    options it does not take (`tracegen.export.registry.check_options`)."""

    fmt: str
    only_success: bool = False
    only_ideal: bool = False
    reasoning_field: bool = False
    keep_logprobs: bool = False
    tokenizer: Path | None = None
    require_exact: bool = False
    max_length: int | None = None
    min_group_size: int | None = None
    drop_equal_scores: bool = False


class Skipped(Exception):
    """A trace, or one record of it, left out; ``reason`` is how the summary counts it
    ("without exact ids (--require-exact)"), ``detail`` what went wrong with this one."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass
class ConvertCounts:
    """What a conversion converted and skipped; ``detail`` is the format's own account
    (`Builder.summary`)."""

    converted: int = 0
    failed: int = 0
    filtered: int = 0
    incomplete: int = 0
    kept_failures: Counter[str] = field(default_factory=Counter)
    """Failed episodes converted (formats that keep them), by ``kind/reason``."""
    unsuccessful: int = 0
    """Episodes converted that did not pass their tests (those that failed included)."""
    no_model_token: int = 0
    """Failed episodes skipped because the model wrote nothing (the server failed)."""
    outside_model: Counter[str] = field(default_factory=Counter)
    """Failed episodes skipped because they failed for a reason not the model's (a server
    or tracegen fault: `NOT_THE_MODELS`), by ``kind/reason``."""
    skipped: Counter[str] = field(default_factory=Counter)
    first_skip: str = ""
    detail: str = ""
    outputs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Lines the conversion warns with, after its summary (one per kind of problem)."""

    def skip(self, trace: Trace, why: Skipped) -> None:
        self.skipped[why.reason] += 1
        if not self.first_skip and why.detail:
            self.first_skip = f"first: {trace.id}: {why.detail}"

    def summary(self, options: ConvertOptions) -> str:
        skipped = []
        if self.failed:
            skipped.append(f"{self.failed} failed episodes")
        if self.no_model_token:
            skipped.append(f"{self.no_model_token} failed episodes without a model token")
        if self.outside_model:
            skipped.append(
                f"{self.outside_model.total()} episodes failed by the server or tracegen "
                f"({_by_reason(self.outside_model)})"
            )
        if self.filtered:
            flag = "--only-ideal" if options.only_ideal else "--only-success"
            skipped.append(f"{self.filtered} filtered by {flag}")
        if self.incomplete:
            skipped.append(f"{self.incomplete} without an assistant turn")
        skipped += [f"{n} {reason}" for reason, n in self.skipped.items()]
        text = f"converted {self.converted} traces ({options.fmt}) → {', '.join(self.outputs)}"
        if self.unsuccessful:
            text += f", {self.unsuccessful} of them from unsuccessful episodes"
        if self.kept_failures:
            failed = self.kept_failures.total()
            text += f", {failed} of them failed episodes ({_by_reason(self.kept_failures)})"
        if self.detail:
            text += f": {self.detail}"
        if skipped:
            text += f"; skipped {', '.join(skipped)}"
            text += f" ({self.first_skip})" if self.first_skip else ""
        return text


def _by_reason(counts: Counter[str]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in counts.most_common())


class Builder(Protocol):
    """Records of one format for the traces of one conversion."""

    @property
    def keeps_failures(self) -> bool:
        """Whether failed episodes the model wrote are converted (RL and token formats:
        a policy learns from its failures too), unless ``--only-success``."""
        ...

    @property
    def reads_logprobs(self) -> bool:
        """Whether the traces' logprobs must be read (they are most of a trace's bytes)."""
        ...

    @property
    def batch_rows(self) -> int:
        """Records written together into Parquet or Arrow (`BATCH_ROWS`, or fewer when a
        record is large: a group)."""
        ...

    def rows(self, trace: Trace) -> Iterable[Row]:
        """The records of a trace that passed the filters; `Skipped` leaves it out, a
        `ConfigError` stops the conversion (the caller names the line)."""
        ...

    def gather(self, rows: Iterator[Row]) -> Iterator[Row]:
        """The records as written, from every record `rows` gave, in order (the same
        records, or groups of them); streams, holding at most one group."""
        ...

    def summary(self) -> str:
        """What the summary line says of the records made ("" for nothing more)."""
        ...

    def close(self) -> None: ...


def problem_index(trace: Trace) -> int | None:
    """The index of the problem: the first user message."""
    return next((i for i, m in enumerate(trace.messages) if m.role == "user"), None)


def is_convertible(trace: Trace) -> bool:
    """A problem (a user turn) and at least one assistant turn after it."""
    first = problem_index(trace)
    return first is not None and any(m.role == "assistant" for m in trace.messages[first:])


def steps_by_message(trace: Trace) -> dict[int, list[Step]]:
    """The trace's steps by the message they are in (an empty list for a message without)."""
    by_message: dict[int, list[Step]] = defaultdict(list)
    for step in trace.steps:
        if step.message_index is not None:
            by_message[step.message_index].append(step)
    return by_message


TRACE_COLUMNS = {
    "id": "string",
    "problem_id": "string",
    "sample": "int64",
    "mode": "string",
    "model": "string",
    "score": "float64",
    "success": "bool",
    "is_ideal": "bool",
    "reward": "float64",
    "error_kind": "string",
    "error_reason": "string",
    "outcome": "string",
    "test_outcomes": "list<string>",
}
"""The trace fields records may keep, and their Arrow types."""


def trace_columns(names: Iterable[str]) -> dict[str, Any]:
    """The `datasets` features of the trace fields ``names``, in that order."""
    from datasets import Sequence, Value

    return {
        name: Sequence(Value("string"))
        if TRACE_COLUMNS[name] == "list<string>"
        else Value(TRACE_COLUMNS[name])
        for name in names
    }
