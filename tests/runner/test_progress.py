"""What a run shows while it runs."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from tracegen.progress import Reporter, RunStats


async def test_plain_progress_lines_come_even_while_no_episode_finishes():
    reporter = Reporter(RunStats(total=3), lambda: 2, display="plain", plain_every_s=0.01)
    reporter.console = Console(file=io.StringIO(), width=200)
    reporter.start()
    await asyncio.sleep(0.2)
    reporter.stop()
    lines = reporter.console.file.getvalue().splitlines()
    assert len(lines) >= 2
    assert all(" 0/3 done · " in line and "in flight 2" in line for line in lines)
