"""`tracegen verify`'s verdicts shown as they come (`tracegen.generate.verify` runs them): a
row each on the terminal and a closing tally, or a JSON line each with ``--json``."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator

from rich.console import Console
from rich.text import Text

from tracegen.grading.verdicts import Verdict
from tracegen.jsonl import dumps
from tracegen.terminal import console, json_bytes, printable

_ID_WIDTH = 40
_DETAIL_WIDTH = 60
_STATUS_WIDTH = len("output-limit")
_STATUS_STYLE = {"ok": "green", "failed": "red", "error": "red", "timeout": "yellow"}


def _detail(verdict: Verdict) -> str:
    """The first line of the error, or of the first failing test's error (or its name)."""
    failure = next((t for t in verdict.tests if not t.passed), None)
    text = verdict.error or (failure and (failure.error or failure.name)) or ""
    line = text.splitlines()[0] if text else ""
    return _fit(line, _DETAIL_WIDTH)


def _fit(text: str, width: int) -> str:
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Rows:
    """Verdicts as aligned rows (problem, passed, status, detail), printed as they come."""

    def __init__(self, console: Console, problem_ids: Iterator[str]) -> None:
        self.console = console
        self.width = min(_ID_WIDTH, max((len(i) for i in problem_ids), default=7))

    def header(self) -> None:
        columns = ("problem".ljust(self.width), " passed", "status".ljust(_STATUS_WIDTH), "detail")
        self.console.print(Text("  ".join(columns), style="bold"), soft_wrap=True)

    def add(self, v: Verdict) -> None:
        row = Text.assemble(
            (_fit(v.problem_id, self.width).ljust(self.width), "bold"),
            "  ",
            f"{v.passed}/{v.total}".rjust(7),
            "  ",
            (v.status.ljust(_STATUS_WIDTH), _STATUS_STYLE.get(v.status, "magenta")),
            "  ",
            _detail(v),
        )
        self.console.print(row, soft_wrap=True)


class _Tally:
    """Counts of statuses, for the closing line."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()

    def add(self, verdict: Verdict) -> None:
        self.statuses[verdict.status] += 1

    def summary(self) -> str:
        """``"3 solutions: 2 passed, 1 failed (failed 1)"``: statuses other than ok counted."""
        total = sum(self.statuses.values())
        ok = self.statuses["ok"]
        line = f"{total} solutions: {ok} passed, {total - ok} failed"
        others = [(s, n) for s, n in self.statuses.most_common() if s != "ok"]
        if others:
            line += " (" + ", ".join(f"{status} {n}" for status, n in others) + ")"
        return line


class VerdictDisplay:
    """Verdicts shown as they come (`tracegen verify`): a row each and a closing tally on
    the terminal, or (``json_out``) one JSON object a line on stdout; warnings on stderr."""

    def __init__(self, problem_ids: Iterator[str], *, json_out: bool) -> None:
        self.stdout, self.stderr = console(), console(stderr=True, highlight=False)
        self.tally = _Tally()
        self.rows = None if json_out else _Rows(self.stdout, problem_ids)

    def start(self) -> None:
        """The rows' header (rows only)."""
        if self.rows is not None:
            self.rows.header()

    def warn(self, message: str) -> None:
        self.stderr.print(f"tracegen: warning: {message}", markup=False, soft_wrap=True)

    def show(self, verdict: Verdict) -> None:
        self.tally.add(verdict)
        if self.rows is not None:
            self.rows.add(verdict)
        else:
            sys.stdout.buffer.write(json_bytes(dumps(verdict)))
            sys.stdout.buffer.flush()

    def close(self) -> None:
        """The closing tally (rows only)."""
        if self.rows is not None:
            self.stdout.print(self.tally.summary(), markup=False)
