"""The malformed tool-call corpus in ``tests/data/toolcalls/`` and how one call is judged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tracegen.jsonl import iter_lines
from tracegen.parsing.toolcall import ToolCallParseError, find_tool_call, parse_tool_call

CORPUS = Path(__file__).resolve().parents[1] / "data" / "toolcalls" / "corpus.jsonl"
Outcome = Literal["parsed", "refused", "failed", "wrong"]


@dataclass(frozen=True)
class Judged:
    """``parsed``: the expected code came back; ``refused``: an unreadable call was
    rejected, as it should be; ``failed``: a readable call was not read; ``wrong``: code
    came back that is not the expected code (worse than a failure)."""

    id: str
    kind: str
    outcome: Outcome
    strategy: str | None
    unescaped: bool = False


def load_corpus() -> list[dict[str, str | None]]:
    return [row for _, row in iter_lines(CORPUS)]


def judge(row: dict[str, str | None]) -> Judged:
    raw, expected = str(row["raw"]), row["expected_code"]
    match = find_tool_call(raw)
    try:
        if match is None:
            raise ToolCallParseError("no <tool_call>")
        call = parse_tool_call(match.payload)
    except ToolCallParseError:
        outcome: Outcome = "refused" if expected is None else "failed"
        return Judged(str(row["id"]), str(row["kind"]), outcome, None)
    outcome = "parsed" if call.code == expected else "wrong"
    return Judged(str(row["id"]), str(row["kind"]), outcome, call.strategy, call.unescaped)
