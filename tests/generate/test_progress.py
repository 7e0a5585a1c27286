"""What a run shows while it runs."""

from __future__ import annotations

import asyncio
import io
import re

from rich.console import Console

from tests.support.fake_ollama import Fault
from tests.support.fake_openai import FakeOpenAI
from tests.support.runs import inline_solver
from tracegen.generate.progress import Reporter, RunStats


async def test_plain_progress_lines_come_even_while_no_episode_finishes():
    reporter = Reporter(RunStats(total=3), lambda: 2, display="plain", plain_every_s=0.01)
    reporter.console = Console(file=io.StringIO(), width=200)
    reporter.start()
    await asyncio.sleep(0.2)
    reporter.stop()
    lines = reporter.console.file.getvalue().splitlines()
    assert len(lines) >= 2
    assert all(" 0/3 done · " in line and "in flight 2" in line for line in lines)


def test_retries_are_counted_and_shown_once_each_off_a_terminal(cli, model, workspace, monkeypatch):
    monkeypatch.setenv("TRACEGEN_RETRY_INITIAL_S", "0.01")
    model.fail_next(Fault("status", 503), Fault("status", 503))
    result = cli(workspace.args(model, "--limit", "2", "--concurrency", "1"))
    assert result.exit_code == 0, result.output
    retries = [line for line in result.stderr.splitlines() if "retrying in" in line]
    assert len(retries) == 2
    assert all(line.startswith("tracegen: warning: ") for line in retries)
    assert re.search(r"request retries\s+│ 2\s", result.stdout)


def test_quiet_runs_print_no_retry_lines(cli, model, workspace, monkeypatch):
    monkeypatch.setenv("TRACEGEN_RETRY_INITIAL_S", "0.01")
    model.fail_next(Fault("status", 503))
    result = cli(workspace.args(model, "--limit", "1", "--quiet"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert len(model.requests) >= 2


async def test_the_rates_count_requests_and_executions_as_they_end_not_episodes():
    """A long episode's tokens show in tok/s while it runs, not only once it is recorded."""
    reporter = Reporter(RunStats(total=1), lambda: 1, display="plain", plain_every_s=0.01)
    reporter.console = Console(file=io.StringIO(), width=200)
    reporter.live = lambda: (5000, 20)
    reporter.stats.started -= 10  # as if the run had been going for ten seconds
    rates = re.search(r" (\d+) tok/s · (\d+\.\d) exec/s · ", reporter.status())
    assert rates is not None
    assert 450 <= int(rates[1]) <= 500 and 1.8 <= float(rates[2]) <= 2.0


def test_a_runs_line_counts_the_tokens_and_executions_of_an_episode_still_running(
    cli, workspace, monkeypatch
):
    """The scheduler feeds the line the pool's and the sandbox's own counts: while the one
    episode waits on its second request, its first answer and its tool call already show."""
    start = Reporter.start

    def start_often(reporter: Reporter) -> None:
        reporter.plain_every_s = 0.05
        start(reporter)

    monkeypatch.setattr(Reporter, "start", start_often)
    with FakeOpenAI("vllm", latency_s=0.5) as server:
        server.set_responder(inline_solver)
        args = workspace.args(server.api, "--mode", "inline-tools", "--limit", "1")
        result = cli([*args, "--backend", "openai", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    rates = [
        (int(m[1]), float(m[2]))
        for m in re.finditer(r" 0/1 done · .* (\d+) tok/s · (\d+\.\d) exec/s · ", result.stdout)
    ]
    assert rates and rates[-1][0] > 0 and rates[-1][1] > 0, result.stdout
