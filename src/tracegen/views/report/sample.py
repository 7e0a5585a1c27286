"""The traces embedded in the page for browsing: read back by position, validated, trimmed.

Only the sample is validated as a `Trace` (with pydantic), and only what `tracegen show`
renders is kept; logprobs are dropped and very long texts cut, so the page stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tracegen.errors import JsonlError
from tracegen.jsonl import open_binary, validate
from tracegen.schema import ChatMessage, Trace
from tracegen.views.report.facts import failure_kind, outcome
from tracegen.views.stats import Position

MAX_TEXT = 20_000


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}\n… ({len(text) - MAX_TEXT:,} more characters not shown)"


def _message(message: ChatMessage) -> dict[str, Any]:
    calls = [call.model_dump_json() for call in message.tool_calls or []]
    return {
        "role": message.role,
        "content": _cut(message.content),
        "thinking": _cut(message.thinking),
        "tool_calls": calls,
        "tool_name": message.tool_name,
    }


def browsable(trace: Trace) -> dict[str, Any]:
    """What the page's trace browser shows of one trace (what `tracegen show` renders)."""
    problem = next((m for m in trace.messages if m.role == "user"), None)
    verdict = trace.verdict
    error = (trace.error.kind, trace.error.reason) if trace.error else None
    out: dict[str, Any] = {
        "id": trace.id,
        "problem_id": trace.problem_id,
        "sample": trace.sample,
        "mode": trace.mode,
        "model": trace.model,
        "created_at": trace.created_at.isoformat(timespec="seconds"),
        "score": trace.score,
        "success": trace.success,
        "reward": trace.reward,
        "is_ideal": trace.is_ideal,
        "outcome": outcome(trace.success, trace.is_ideal, trace.error is not None),
        "failure": failure_kind(trace.success, error, verdict.status if verdict else None),
        "logprobs_status": trace.logprobs_status,
        "continuation": trace.continuation,
        "problem": _cut(problem.content) if problem else None,
        "steps": [
            {
                "kind": s.kind,
                "text": _cut(s.text),
                "source": s.source,
                "parse_strategy": s.parse_strategy,
            }
            for s in trace.steps
        ],
        "messages": [],
        "verdict": None,
        "metrics": {k: v for k, v in trace.metrics.model_dump().items() if v},
        "usage": trace.usage.model_dump(),
        "error": trace.error.model_dump() if trace.error else None,
    }
    if not trace.steps:
        shown = [m for m in trace.messages if m is not problem and m.role != "system"]
        out["messages"] = [_message(m) for m in shown]
    if verdict is not None:
        out["verdict"] = {
            "status": verdict.status,
            "passed": verdict.passed,
            "total": verdict.total,
            "tests": [
                {
                    "name": t.name,
                    "passed": t.passed,
                    "expected": _cut(t.expected),
                    "actual": _cut(t.actual),
                    "error": _cut(t.error),
                }
                for t in verdict.tests
            ],
        }
    return out


def read_sample(paths: list[Path], positions: list[Position]) -> list[dict[str, Any]]:
    """The traces at ``positions`` (sorted), as `browsable` records; unreadable ones skipped."""
    records: list[dict[str, Any]] = []
    by_file: dict[int, list[int]] = {}
    for file_index, offset in positions:
        by_file.setdefault(file_index, []).append(offset)
    for file_index, offsets in by_file.items():
        path = paths[file_index]
        with open_binary(path) as fh:
            for offset in offsets:
                fh.seek(offset)
                try:
                    obj = orjson.loads(fh.readline())
                    obj.pop("logprobs", None)
                    trace = validate(obj, Trace, path, 0)
                except (orjson.JSONDecodeError, AttributeError, JsonlError):
                    continue
                records.append(browsable(trace))
    return records
