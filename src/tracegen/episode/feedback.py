"""What the model is told about an execution: one formatter for every mode, capped in size."""

from __future__ import annotations

from typing import Any, Literal

import orjson

from tracegen.schema import ExecResult, Problem, TestCase, TestResult

MAX_FAILURES_SHOWN = 5
MAX_LINE_CHARS = 300
MAX_OUTPUT_CHARS = 2000

_STATUS_TEXT = {
    "timeout": "the program ran out of time",
    "memory": "the program ran out of memory",
    "killed": "the program was killed",
    "output-limit": "the program printed more output than allowed",
}


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"


def tail(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """The end of ``text`` (where tracebacks and final prints are), marking the cut."""
    return text if len(text) <= limit else "[truncated]… " + text[-(limit - 13) :]


def last_line(text: str | None) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _call_text(problem: Problem, test: TestCase) -> str:
    if test.kind == "io" and problem.entry_point:
        args = [repr(a) for a in test.args] + [f"{k}={v!r}" for k, v in test.kwargs.items()]
        return f"{problem.entry_point}({', '.join(args)})"
    if test.kind == "assert" and test.code and test.code.strip():
        return test.code.strip().splitlines()[0]
    if test.kind == "functional" and problem.entry_point and not test.private:
        return f"{problem.entry_point}({', '.join(repr(a) for a in test.args)})"
    if test.kind == "stdio" and not test.private:
        return f"input {test.input!r}"
    return test.name


def _failure_line(problem: Problem, result: TestResult) -> str:
    cases = {t.name: t for t in problem.tests}
    case = cases.get(result.name)
    call = _call_text(problem, case) if case else result.name
    if result.outcome is not None and result.outcome != "wrong":
        return clip(f"- {call}: {result.outcome}: {last_line(result.error)}")
    if result.error:
        return clip(f"- {call} raised {last_line(result.error)}")
    if result.outcome is not None:  # a program's output: shown as the text it is
        return clip(f"- {call}: expected {result.expected!r}, got {result.actual!r}")
    return clip(f"- {call}: expected {result.expected}, got {result.actual}")


def _crash_text(result: ExecResult) -> str:
    if result.status in _STATUS_TEXT:
        return _STATUS_TEXT[result.status]
    return clip(last_line(result.error) or last_line(result.stderr) or "the program failed")


def format_test_feedback(result: ExecResult, problem: Problem) -> str:
    """Tests passed, or per failing test its input, expected and actual value (or error)."""
    if result.status == "compile":
        return f"Error: the program does not compile:\n{tail(result.error or '', 1500)}"
    if result.status not in ("ok", "failed"):
        return f"Error: {_crash_text(result)}"
    lines = [f"{result.passed}/{result.total} tests passed."]
    failures = [t for t in result.tests if not t.passed]
    lines += [_failure_line(problem, t) for t in failures[:MAX_FAILURES_SHOWN]]
    if len(failures) > MAX_FAILURES_SHOWN:
        lines.append(f"- … and {len(failures) - MAX_FAILURES_SHOWN} more failing")
    return "\n".join(lines)


def format_run_feedback(result: ExecResult) -> str:
    """A script's output for the tag modes: stdout, then the error if it did not finish."""
    parts = [tail(result.stdout).rstrip()] if result.stdout.strip() else []
    if result.status != "ok":
        parts.append(f"Error: {_crash_text(result)}")
    return "\n".join(parts) or "(no output)"


def tool_payload(result: ExecResult) -> dict[str, Any]:
    """A tool call's result as a JSON object: status, exit code, capped output, error."""
    payload: dict[str, Any] = {
        "status": result.status,
        "exit_code": result.exit_code,
        "stdout": tail(result.stdout),
        "stderr": tail(result.stderr, MAX_OUTPUT_CHARS // 2),
    }
    if result.status != "ok":
        payload["error"] = _crash_text(result)
    return payload


def tool_json(result: ExecResult) -> str:
    return orjson.dumps(tool_payload(result)).decode()


def tool_error_json(message: str) -> str:
    """A tool response that is not an execution (the call could not be run)."""
    return orjson.dumps({"status": "not-run", "error": message}).decode()


def execution_feedback(
    result: ExecResult, problem: Problem, *, tested: bool
) -> tuple[Literal["result", "error"], str]:
    """``(tag, text)`` for the tag modes: ``result`` when the run succeeded, else ``error``."""
    text = format_test_feedback(result, problem) if tested else format_run_feedback(result)
    return ("result" if result.status == "ok" else "error"), text
