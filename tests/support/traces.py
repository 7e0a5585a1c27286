"""Trace files for the output tests: `write_traces`, every mode and failure kind, and a varied
"night of generation" for screenshots and size checks."""

from __future__ import annotations

import random
from pathlib import Path

from tests.support.traces_factory import (
    failed_trace,
    inline_tools_trace,
    markers_trace,
    native_tools_trace,
    tool_feedback_trace,
)
from tracegen.jsonl import JsonlWriter
from tracegen.schema import ExecResult, Step, TestResult, Trace, TraceError

MODES = (
    "markers",
    "forced-interleave",
    "tool-feedback",
    "interleaved-tools",
    "inline-tools",
    "structured",
    "native-tools",
)
EPISODE_ERRORS = (
    ("backend", "timeout"),
    ("limit", "max_steps"),
    ("sandbox", "crashed"),
    ("parse", "unreadable_tool_call"),
    ("internal", "exception"),
)
TEST_STATUSES = ("failed", "error", "timeout", "memory")


def write_traces(path: Path, traces: list[Trace]) -> Path:
    with JsonlWriter(path) as writer:
        for trace in traces:
            writer.write(trace)
    return path


def _structured(i: int) -> Trace:
    trace = tool_feedback_trace(i, problem_id="mul")
    steps = [
        Step(kind="plan", text="Multiply with *.", message_index=2),
        Step(kind="code", text="def mul(a, b):\n    return a * b", message_index=2),
        Step(kind="result", text="2/2 tests passed.", source="system", message_index=3),
        Step(kind="reflection", text="It passed.", message_index=4),
    ]
    return trace.model_copy(update={"id": f"structured-{i}", "mode": "structured", "steps": steps})


def _failing_tests(trace: Trace, status: str) -> Trace:
    verdict = ExecResult(
        status=status,  # type: ignore[arg-type]
        tests=[TestResult(name="t0", passed=False, expected="3", actual=None, error=status)],
    )
    return trace.model_copy(
        update={"verdict": verdict, "score": 0.0, "success": False, "is_ideal": False}
    )


def every_mode_and_failure() -> list[Trace]:
    """Each of the seven modes ideal, plus failing tests of every status and episode errors of
    every kind, spread over the modes."""
    shapes = {
        "markers": markers_trace,
        "tool-feedback": tool_feedback_trace,
        "inline-tools": inline_tools_trace,
        "native-tools": native_tools_trace,
        "forced-interleave": markers_trace,
        "interleaved-tools": markers_trace,
    }
    traces: list[Trace] = []
    for n, mode in enumerate(MODES):
        base = _structured(n) if mode == "structured" else shapes[mode](n)
        traces.append(base.model_copy(update={"id": f"{mode}-ideal", "mode": mode}))
    for n, status in enumerate(TEST_STATUSES):
        mode = MODES[n % len(MODES)]
        trace = _failing_tests(markers_trace(100 + n, problem_id="sub"), status)
        traces.append(trace.model_copy(update={"id": f"{mode}-tests-{status}", "mode": mode}))
    for n, (kind, reason) in enumerate(EPISODE_ERRORS):
        mode = MODES[(n + 3) % len(MODES)]
        error = TraceError(kind=kind, reason=reason, message=f"{kind} went wrong")  # type: ignore[arg-type]
        trace = failed_trace(200 + n, problem_id="div", reason=reason)
        traces.append(
            trace.model_copy(update={"id": f"{mode}-{kind}", "mode": mode, "error": error})
        )
    return traces


def night_of_traces(n: int, seed: int = 7) -> list[Trace]:
    """``n`` traces over 60 problems of varying difficulty and every mode, with spread-out
    scores, token counts and latencies, as a night's run would give."""
    rng = random.Random(seed)
    pool = every_mode_and_failure()
    difficulty = {f"problem_{p:02d}": rng.random() ** 0.7 for p in range(60)}
    problems = list(difficulty)
    traces = []
    for i in range(n):
        base = pool[i % len(pool)]
        problem = problems[rng.randrange(len(problems))]
        update: dict[str, object] = {"id": f"{base.id}-{i}", "problem_id": problem, "sample": i}
        metrics = base.metrics.model_copy(
            update={
                "prompt_tokens": int(rng.lognormvariate(6, 0.5)),
                "completion_tokens": int(rng.lognormvariate(6.5, 0.6)),
                "latency_s": round(rng.lognormvariate(1.2, 0.6), 3),
                "turns": max(1, base.metrics.turns + rng.randrange(-1, 3)),
            }
        )
        update["metrics"] = metrics
        if base.error is None and base.success and rng.random() < difficulty[problem]:
            trace = _failing_tests(base, rng.choice(TEST_STATUSES[:2]))
            passed = rng.randrange(2)
            update.update(score=passed / 2, reward=passed - 1.0)
        else:
            trace = base
        traces.append(trace.model_copy(update=update))
    return traces
