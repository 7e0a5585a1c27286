"""Tool-call parse-success rate on the malformed-call corpus, by kind of damage.

python benchmarks/parse_rate.py
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.toolcall_corpus import Judged, judge, load_corpus

STRATEGIES = ("strict", "escaped", "extracted")


def _row(name: str, judged: list[Judged]) -> list[str]:
    outcomes = Counter(j.outcome for j in judged)
    strategies = Counter(j.strategy for j in judged if j.outcome == "parsed")
    right = outcomes["parsed"] + outcomes["refused"]
    return [
        name,
        str(len(judged)),
        str(outcomes["parsed"]),
        str(outcomes["refused"]),
        str(outcomes["failed"]),
        str(outcomes["wrong"]),
        *(str(strategies[s]) for s in STRATEGIES),
        str(sum(j.unescaped for j in judged if j.outcome == "parsed")),
        f"{right / len(judged):.0%}",
    ]


def main() -> None:
    by_kind: dict[str, list[Judged]] = defaultdict(list)
    for row in load_corpus():
        judged = judge(row)
        by_kind[judged.kind].append(judged)
    table = Table(title="tool-call parsing on tests/data/toolcalls/corpus.jsonl")
    columns = ("kind", "total", "parsed", "refused", "failed", "wrong", *STRATEGIES, "unescaped")
    for column in columns:
        table.add_column(column, justify="left" if column == "kind" else "right")
    table.add_column("rate", justify="right")
    for kind, judged in by_kind.items():
        table.add_row(*_row(kind, judged))
    everything = [j for judged in by_kind.values() for j in judged]
    table.add_section()
    table.add_row(*_row("all", everything))
    Console(width=140).print(table)
    print("rate = (parsed + refused) / total; refused = an unreadable call rejected as expected;")
    print("unescaped = double-escaped line breaks in the code undone after parsing")


if __name__ == "__main__":
    main()
