"""`tracegen problems`: list a problem set as a table, or as tracegen JSONL."""

from __future__ import annotations

import sys
from collections import Counter

from rich.table import Table

from tracegen.errors import ConfigError
from tracegen.jsonl import dumps
from tracegen.problems.loader import load_problems
from tracegen.schema import Problem
from tracegen.terminal import console, json_bytes, untrusted


def split_ids(problem_ids: str | None) -> list[str] | None:
    """``"a, b"`` → ``["a", "b"]``; None → None; naming no id at all is an error."""
    if problem_ids is None:
        return None
    ids = [i.strip() for i in problem_ids.split(",") if i.strip()]
    if not ids:
        raise ConfigError("--problem-ids names no problem id")
    return ids


def _test_kinds(problem: Problem) -> str:
    counts = Counter(t.kind for t in problem.tests)
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def problems_command(
    *, source: str, limit: int | None, problem_ids: str | None, json_out: bool
) -> None:
    """Print the selected problems: a rich table, or one problem JSON object per line."""
    problems = load_problems(source, limit=limit, problem_ids=split_ids(problem_ids))
    if json_out:
        out = sys.stdout.buffer
        for problem in problems:
            out.write(json_bytes(dumps(problem)))
        out.flush()
        return
    table = Table(title=untrusted(f"{source}: {len(problems)} problems"))
    table.add_column("id", style="bold")
    table.add_column("kind")
    table.add_column("entry point")
    table.add_column("tests", justify="right")
    table.add_column("test kinds")
    for p in problems:
        cells = (p.id, p.kind, p.entry_point or "-", str(len(p.tests)), _test_kinds(p))
        table.add_row(*map(untrusted, cells))
    console().print(table)
