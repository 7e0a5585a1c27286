"""What a run shows: a live rich bar on a terminal, plain log lines otherwise, a summary."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rich.console import Group, RenderableType
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from tracegen.grading.filters import MODEL_ENDINGS, Outcome
from tracegen.schema import Trace
from tracegen.terminal import console, one_line, text_table, untrusted

Display = Literal["live", "plain", "quiet"]


@dataclass
class RunStats:
    """Counters of one run, updated as each episode is recorded."""

    total: int = 0
    skipped: int = 0
    done: int = 0
    accepted: int = 0
    rejected: int = 0
    failed: int = 0
    success: int = 0
    ideal: int = 0
    tokens: int = 0
    retries: int = 0
    put_back: int = 0
    executions: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    cpu_started: float = field(default_factory=time.process_time)

    def add(self, trace: Trace, outcome: Outcome) -> None:
        self.done += 1
        self.accepted += outcome == "accepted"
        self.rejected += outcome == "rejected"
        self.failed += outcome == "failed"
        self.success += trace.success
        self.ideal += trace.is_ideal
        self.tokens += trace.usage.completion_tokens
        if trace.error is not None:
            self.failures[f"{trace.error.kind}: {trace.error.reason}"] += 1

    @property
    def samples(self) -> int:
        """Episodes the model ended (all but ``failed`` ones): what rates are of, as in
        ``tracegen stats`` of the output."""
        return self.done - self.failed

    @property
    def elapsed(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    def rate(self, n: int) -> str:
        return f"{100 * n / self.samples:.0f}%" if self.samples else "-"

    def eta(self) -> str:
        if not self.done:
            return "-"
        return _duration(self.elapsed / self.done * (self.total - self.done))


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class _StatsLine:
    """Re-rendered on every refresh, so in-flight and tokens/s stay live between episodes."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def __rich__(self) -> RenderableType:
        return untrusted(self.reporter.status())


def _status(s: RunStats, in_flight: int, tokens: int, executions: int) -> str:
    return (
        f"accepted {s.accepted} · success {s.rate(s.success)} · ideal {s.rate(s.ideal)} · "
        f"{tokens / s.elapsed:.0f} tok/s · {executions / s.elapsed:.1f} exec/s · "
        f"in flight {in_flight} · errors {s.failed} · retries {s.retries}"
    )


class Reporter:
    """Shows the progress of a run in one of three ways: ``live``, ``plain`` or ``quiet``."""

    def __init__(
        self,
        stats: RunStats,
        in_flight: Callable[[], int],
        *,
        display: Display,
        plain_every_s: float = 10.0,
    ) -> None:
        self.stats = stats
        self.in_flight = in_flight
        self.display = display
        self.console = console()
        self.errors = console(stderr=True)
        self.plain_every_s = plain_every_s
        self._ticker: asyncio.Task[None] | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._live: Live | None = None
        self.detail: Callable[[], str] | None = None
        """What the executor adds to the progress line (a cluster's actors), if anything."""
        self.live: Callable[[], tuple[int, int]] | None = None
        """Tokens generated and executions run so far, counted as each request and execution
        ends, for the line's rates; without it, those of the episodes recorded so far (a
        long episode would show nothing until it ends)."""

    @staticmethod
    def choose(quiet: bool) -> Display:
        """``quiet`` when asked, ``live`` on a terminal, else ``plain``."""
        if quiet:
            return "quiet"
        return "live" if console().is_terminal else "plain"

    def info(self, message: str) -> None:
        if self.display != "quiet":
            self.console.print(message, highlight=False, markup=False, soft_wrap=True)

    def warn(self, message: str) -> None:
        self.notice(f"warning: {one_line(message, 2000)}")

    def retry(self, message: str) -> None:
        """A model request being retried: counted, and one line when progress is plain."""
        self.stats.retries += 1
        if self.display == "plain":
            self.warn(message)

    def notice(self, message: str) -> None:
        """A line on stderr, shown even with ``--quiet``."""
        self.errors.print(f"tracegen: {message}", highlight=False, markup=False, soft_wrap=True)

    def status(self) -> str:
        """The live part of the progress line."""
        s = self.stats
        tokens, executions = self.live() if self.live is not None else (s.tokens, s.executions)
        line = _status(s, self.in_flight(), tokens, executions)
        return f"{line} · {self.detail()}" if self.detail is not None else line

    def start(self) -> None:
        """Show progress from now on; call it inside the run's event loop."""
        self.stats.started = time.monotonic()
        self.stats.cpu_started = time.process_time()
        if self.display == "plain":
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        if self.display != "live":
            return
        self._bar = Progress(
            TextColumn("episodes"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._task = self._bar.add_task("episodes", total=self.stats.total)
        group = Group(self._bar, _StatsLine(self))
        self._live = Live(group, console=self.console, refresh_per_second=4)
        self._live.start()

    def update(self) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.stats.done)
        elif self.display == "plain" and self.stats.done == self.stats.total:
            self._plain_line()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.plain_every_s)
            self._plain_line()

    def _plain_line(self) -> None:
        s = self.stats
        clock = time.strftime("%H:%M:%S")
        self.info(f"{clock} {s.done}/{s.total} done · {self.status()} · ETA {s.eta()}")

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def summary(
        self,
        hosts: list[tuple[str, int, int, int]],
        rejects: Path | None,
        *,
        unit: str = "requests",
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        """One table: episodes, outcomes, rates, throughput, this process's CPU; ``hosts``
        rows are (host, ``unit`` served, failures, times benched); then ``extra`` rows."""
        if self.display == "quiet":
            return
        s = self.stats

        def kept(n: int) -> str:
            if not n:
                return "0"
            return f"{n} (in {rejects})" if rejects else f"{n} (not kept: see --rejects)"

        table = text_table(title="tracegen run", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        table.add_row("episodes", f"{s.done} of {s.total} ({s.skipped} done before)")
        table.add_row("accepted", str(s.accepted))
        table.add_row("rejected", kept(s.rejected))
        ended = [(r, n) for r, n in s.failures.most_common() if r.split(":")[0] in MODEL_ENDINGS]
        table.add_row("ended early", str(sum(n for _, n in ended)))
        for reason, n in ended:
            table.add_row("", untrusted(f"{n} × {reason}"))
        table.add_row("failed", kept(s.failed))
        for reason, n in s.failures.most_common():
            if (reason, n) not in ended:
                table.add_row("", untrusted(f"{n} × {reason}"))
        table.add_row("request retries", str(s.retries))
        table.add_row("episodes run again", str(s.put_back))
        table.add_row("success rate", s.rate(s.success))
        table.add_row("ideal rate", s.rate(s.ideal))
        table.add_row("tokens", f"{s.tokens} ({s.tokens / s.elapsed:.0f}/s)")
        table.add_row("time", f"{_duration(s.elapsed)} ({s.done / s.elapsed:.2f} traces/s)")
        table.add_row("executions", f"{s.executions} ({s.executions / s.elapsed:.1f}/s)")
        cpu = time.process_time() - s.cpu_started
        per = f", {1000 * cpu / s.done:.1f} ms per episode" if s.done else ""
        table.add_row("tracegen CPU", f"{cpu:.1f} s{per}")
        for host, served, failures, benched in hosts:
            row = (host, f"{served} {unit}, {failures} failed, benched {benched}×")
            table.add_row(*map(untrusted, row))
        for name, value in extra or []:
            table.add_row(untrusted(name), untrusted(value))
        self.console.print(table)
