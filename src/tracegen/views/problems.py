"""`tracegen problems`: list a problem set as a table, or as tracegen JSONL."""

from __future__ import annotations

import sys
from collections import Counter

from tracegen.jsonl import dumps
from tracegen.problems.loader import load_problems
from tracegen.schema import Problem
from tracegen.terminal import console, json_bytes, text_table, untrusted


def _test_kinds(problem: Problem) -> str:
    counts = Counter(t.kind for t in problem.tests)
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def problems_command(
    *, source: str, limit: int | None, problem_ids: list[str] | None, json_out: bool
) -> None:
    """Print the selected problems: a rich table, or one problem JSON object per line."""
    problems = load_problems(source, limit=limit, problem_ids=problem_ids)
    if json_out:
        out = sys.stdout.buffer
        for problem in problems:
            out.write(json_bytes(dumps(problem)))
        out.flush()
        return
    table = text_table(title=untrusted(f"{source}: {len(problems)} problems"))
    table.add_column("id", style="bold")
    table.add_column("kind")
    table.add_column("entry point")
    table.add_column("tests", justify="right")
    table.add_column("test kinds")
    for p in problems:
        cells = (p.id, p.kind, p.entry_point or "-", str(len(p.tests)), _test_kinds(p))
        table.add_row(*map(untrusted, cells))
    console().print(table)
