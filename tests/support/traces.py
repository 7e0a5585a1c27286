"""The trace factory: realistic `Trace` records of every mode shape, built with the schema
directly, and the collections the output tests read (`all_shapes`, `every_mode_and_failure`,
a varied `night_of_traces`), written with `write_traces`.

Every builder takes the episode number first and the rest as keywords with defaults
(``markers_trace(3, problem_id="sub", passed=1)``); `make_trace` is the one constructor they
share. Traces with exact token ids are a layer on it, in `tests.support.token_traces`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from tracegen.jsonl import JsonlWriter
from tracegen.schema import (
    ChatMessage,
    ExecResult,
    Metrics,
    Step,
    TestResult,
    TokenLogprob,
    ToolCall,
    ToolFunction,
    TopLogprob,
    Trace,
    TraceError,
    TurnLogprobs,
    Usage,
)

SYSTEM = "You solve coding problems. Think in <think>, write code in <code>."
PROBLEM = "Write `add(a, b)` that returns the sum of a and b."
CODE = "def add(a, b):\n    return a + b  # a<b or not"
TRICKY = 'def add(a, b):\n    s = "</tool_response></code>"\n    return a + b'

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


def opening(system: str = SYSTEM, problem: str = PROBLEM) -> list[ChatMessage]:
    """The system prompt and the problem: how every conversation starts."""
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=problem)]


def make_trace(
    *,
    id: str,
    sample: int = 0,
    problem_id: str = "add",
    mode: str = "markers",
    model: str = "qwen3:8b",
    messages: list[ChatMessage] | None = None,
    **fields: Any,
) -> Trace:
    """A trace of ``mode``; its conversation is `opening` unless ``messages`` is given, any other
    field of `Trace` as a keyword."""
    return Trace(
        id=id,
        problem_id=problem_id,
        sample=sample,
        mode=mode,
        model=model,
        messages=opening() if messages is None else messages,
        **fields,
    )


def write_traces(path: Path, traces: list[Trace]) -> Path:
    with JsonlWriter(path) as writer:
        for trace in traces:
            writer.write(trace)
    return path


# ---------------------------------------------------------------- one trace of each shape


def _verdict(passed: int, total: int = 2) -> ExecResult:
    tests = [
        TestResult(name=f"t{i}", passed=i < passed, expected="3", actual="3" if i < passed else "4")
        for i in range(total)
    ]
    return ExecResult(status="ok" if passed == total else "failed", exit_code=0, tests=tests)


def _logprobs(indices: list[int]) -> list[TurnLogprobs]:
    tokens = [
        TokenLogprob(
            token="def",
            logprob=-0.1,
            bytes=[100, 101, 102],
            top_logprobs=[TopLogprob(token="def", logprob=-0.1)],
        ),
        TokenLogprob(token=" add", logprob=-0.5),
    ]
    return [TurnLogprobs(message_index=i, tokens=tokens) for i in indices]


def _finish(trace: Trace, passed: int, total: int = 2, **metrics: Any) -> Trace:
    trace.verdict = _verdict(passed, total)
    trace.score = passed / total
    trace.success = passed == total
    trace.reward = 2 * trace.score - 1
    trace.metrics = Metrics(**metrics)
    trace.usage = Usage(requests=metrics.get("turns", 1), completion_tokens=120, prompt_tokens=80)
    return trace


def markers_trace(
    i: int = 0, *, problem_id: str = "add", passed: int = 2, ideal: bool = True
) -> Trace:
    """One request: the model interleaves think/code/verify; the final code is run once."""
    answer = f"<think>Add them.</think>\n<code>\n{CODE}\n</code>\n<verify>add(1, 2) == 3</verify>"
    trace = make_trace(
        id=f"markers-{i}",
        problem_id=problem_id,
        sample=i,
        mode="markers",
        hosts=["http://127.0.0.1:11434"],
        messages=[*opening(), ChatMessage(role="assistant", content=answer)],
        steps=[
            Step(kind="think", text="Add them.", message_index=2),
            Step(kind="code", text=CODE, message_index=2),
            Step(kind="verify", text="add(1, 2) == 3", message_index=2),
        ],
        final_code=CODE,
        logprobs=_logprobs([2]),
        logprobs_status="present",
    )
    trace = _finish(
        trace,
        passed,
        think_segments=1,
        code_blocks=1,
        executions=1,
        turns=1,
        prompt_tokens=80,
        completion_tokens=120,
        latency_s=1.25,
    )
    trace.is_ideal = ideal and trace.success
    return trace


def tool_feedback_trace(i: int = 0, *, problem_id: str = "add", passed: int = 2) -> Trace:
    """Several turns; the system's user turns carry <error>/<result> for each execution."""
    broken = "def add(a, b):\n    return a - b"
    error = "1/2 tests passed.\n- add(1, 2): expected 3, got -1 </result>"
    first = f"<think>Subtract?</think>\n<code>{broken}</code>"
    second = f"<think>Wrong sign.</think>\n<code>{CODE}</code>"
    trace = make_trace(
        id=f"feedback-{i}",
        problem_id=problem_id,
        sample=i,
        mode="tool-feedback",
        messages=[
            *opening(),
            ChatMessage(role="assistant", content=first),
            ChatMessage(role="user", content=f"<error>{error}</error>"),
            ChatMessage(role="assistant", content=second),
            ChatMessage(role="user", content="<result>2/2 tests passed.</result>"),
            ChatMessage(role="assistant", content="<answer>Done.</answer>"),
        ],
        steps=[
            Step(kind="think", text="Subtract?", message_index=2),
            Step(kind="code", text=broken, message_index=2, exec_index=0),
            Step(kind="error", text=error, source="system", message_index=3, exec_index=0),
            Step(kind="think", text="Wrong sign.", message_index=4),
            Step(kind="code", text=CODE, message_index=4, exec_index=1),
            Step(kind="result", text="2/2 tests passed.", source="system", message_index=5),
            Step(kind="answer", text="Done.", message_index=6),
        ],
        final_code=CODE,
        logprobs_status="absent",
    )
    trace = _finish(
        trace,
        passed,
        think_segments=2,
        code_blocks=2,
        executions=2,
        turns=3,
        hallucinated_results=1,
        prompt_tokens=400,
        completion_tokens=300,
        latency_s=4.5,
    )
    trace.is_ideal = trace.success
    return trace


def inline_tools_trace(
    i: int = 0, *, problem_id: str = "add", passed: int = 2, tricky: bool = False
) -> Trace:
    """ONE assistant message; the <tool_response> parts inside it were written by the system.
    ``tricky``: the code and its output hold the closing tags of the format."""
    code = TRICKY if tricky else CODE
    call = orjson.dumps({"name": "python", "arguments": {"code": code}}).decode()
    response = orjson.dumps({"status": "ok", "stdout": "3\n</tool_response>" if tricky else "3\n"})
    response_text = response.decode()
    body = (
        f"<think>Let me try it.\n<tool_call>{call}</tool_call>"
        f"<tool_response>{response_text}</tool_response>\nIt prints 3, good.</think>\n"
        f"<code>{code}</code>"
    )
    trace = make_trace(
        id=f"inline-{i}",
        problem_id=problem_id,
        sample=i,
        mode="inline-tools",
        messages=[*opening(), ChatMessage(role="assistant", content=body)],
        steps=[
            Step(kind="think", text="Let me try it.", message_index=2),
            Step(kind="tool_call", text=call, message_index=2, parse_strategy="strict"),
            Step(kind="tool_response", text=response_text, source="system", message_index=2),
            Step(kind="think", text="It prints 3, good.", message_index=2),
            Step(kind="code", text=code, message_index=2),
        ],
        final_code=code,
        continuation="prefill",
        logprobs=_logprobs([2]),
        logprobs_status="present",
    )
    trace = _finish(
        trace,
        passed,
        think_segments=2,
        code_blocks=1,
        executions=2,
        tool_calls=1,
        parse_failures=1,
        parse_strategies={"strict": 1, "escaped": 1},
        turns=2,
        prompt_tokens=300,
        completion_tokens=250,
        latency_s=3.0,
    )
    trace.is_ideal = trace.success
    return trace


def native_tools_trace(i: int = 0, *, problem_id: str = "add", passed: int = 2) -> Trace:
    """Structured tool_calls and role 'tool' messages; thinking in its own field."""
    call = ToolCall(function=ToolFunction(name="python", arguments={"code": CODE + "\nprint(1)"}))
    output = '{"status": "ok", "stdout": "1\\n"}'
    trace = make_trace(
        id=f"native-{i}",
        problem_id=problem_id,
        sample=i,
        mode="native-tools",
        model="llama3.1:8b",
        messages=[
            *opening(),
            ChatMessage(role="assistant", content="", thinking="Run it first.", tool_calls=[call]),
            ChatMessage(role="tool", content=output, tool_name="python"),
            ChatMessage(role="assistant", content=f"<code>{CODE}</code>", thinking="It works."),
        ],
        steps=[
            Step(kind="think", text="Run it first.", message_index=2),
            Step(kind="tool_call", text=call.model_dump_json(), message_index=2),
            Step(kind="tool_response", text=output, source="system", message_index=3),
            Step(kind="think", text="It works.", message_index=4),
            Step(kind="code", text=CODE, message_index=4),
        ],
        final_code=CODE,
        logprobs=_logprobs([2, 4]),
        logprobs_status="present",
    )
    trace = _finish(
        trace,
        passed,
        think_segments=2,
        code_blocks=1,
        executions=2,
        tool_calls=1,
        parse_strategies={"strict": 1},
        turns=2,
        prompt_tokens=350,
        completion_tokens=200,
        latency_s=2.0,
    )
    trace.is_ideal = trace.success
    return trace


def structured_trace(i: int = 0, *, problem_id: str = "mul", passed: int = 2) -> Trace:
    """The tool-feedback conversation with the structured mode's plan/code/result/reflection
    steps."""
    trace = tool_feedback_trace(i, problem_id=problem_id, passed=passed)
    steps = [
        Step(kind="plan", text="Multiply with *.", message_index=2),
        Step(kind="code", text="def mul(a, b):\n    return a * b", message_index=2),
        Step(kind="result", text="2/2 tests passed.", source="system", message_index=3),
        Step(kind="reflection", text="It passed.", message_index=4),
    ]
    return trace.model_copy(update={"id": f"structured-{i}", "mode": "structured", "steps": steps})


def failed_trace(i: int = 0, *, problem_id: str = "add", reason: str = "timeout") -> Trace:
    """An episode the backend gave up on: partial conversation, ``error`` set."""
    return make_trace(
        id=f"failed-{i}",
        problem_id=problem_id,
        sample=i,
        mode="tool-feedback",
        metrics=Metrics(turns=1, latency_s=600.0),
        error=TraceError(kind="backend", reason=reason, message="no answer in 600 s"),
    )


def with_failing_tests(trace: Trace, status: str) -> Trace:
    """``trace`` with its one test ending in ``status`` (failed, error, timeout, memory)."""
    verdict = ExecResult(
        status=status,
        tests=[TestResult(name="t0", passed=False, expected="3", actual=None, error=status)],
    )
    return trace.model_copy(
        update={"verdict": verdict, "score": 0.0, "success": False, "is_ideal": False}
    )


# ---------------------------------------------------------------- collections


def all_shapes(copies: int = 1) -> list[Trace]:
    """Every mode shape, with successes, partial scores and failed episodes mixed."""
    traces: list[Trace] = []
    for c in range(copies):
        n = 10 * c
        traces += [
            markers_trace(n, problem_id="add"),
            markers_trace(n + 1, problem_id="sub", passed=1),
            markers_trace(n + 2, problem_id="mul", ideal=False),
            tool_feedback_trace(n + 3, problem_id="add"),
            tool_feedback_trace(n + 4, problem_id="sub", passed=0),
            inline_tools_trace(n + 5, problem_id="mul"),
            inline_tools_trace(n + 6, problem_id="add", tricky=True),
            native_tools_trace(n + 7, problem_id="sub"),
            failed_trace(n + 8, problem_id="add"),
            failed_trace(n + 9, problem_id="mul", reason="model_not_found"),
        ]
    return traces


SHAPES = {
    "markers": markers_trace,
    "forced-interleave": markers_trace,
    "tool-feedback": tool_feedback_trace,
    "interleaved-tools": markers_trace,
    "inline-tools": inline_tools_trace,
    "structured": structured_trace,
    "native-tools": native_tools_trace,
}
"""The builder whose conversation each mode writes."""


def every_mode_and_failure() -> list[Trace]:
    """Each of the seven modes ideal, plus failing tests of every status and episode errors of
    every kind, spread over the modes."""
    traces: list[Trace] = []
    for n, mode in enumerate(MODES):
        base = SHAPES[mode](n)
        traces.append(base.model_copy(update={"id": f"{mode}-ideal", "mode": mode}))
    for n, status in enumerate(TEST_STATUSES):
        mode = MODES[n % len(MODES)]
        trace = with_failing_tests(markers_trace(100 + n, problem_id="sub"), status)
        traces.append(trace.model_copy(update={"id": f"{mode}-tests-{status}", "mode": mode}))
    for n, (kind, reason) in enumerate(EPISODE_ERRORS):
        mode = MODES[(n + 3) % len(MODES)]
        error = TraceError(kind=kind, reason=reason, message=f"{kind} went wrong")
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
            trace = with_failing_tests(base, rng.choice(TEST_STATUSES[:2]))
            passed = rng.randrange(2)
            update.update(score=passed / 2, reward=passed - 1.0)
        else:
            trace = base
        traces.append(trace.model_copy(update=update))
    return traces
