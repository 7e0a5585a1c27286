"""Map rows of the public datasets (HumanEval, MBPP, GSM8K; competitive programming in
`tracegen.problems.contests`) to `Problem`s.

The same functions serve rows read from a local file and rows loaded from the Hugging
Face hub. A row that does not fit raises `ValueError` with a short reason.
"""

from __future__ import annotations

import ast
import builtins
import re

from tracegen.problems.contests import Row, RowMapper, contest_format, required_text
from tracegen.schema import Problem, TestCase

_HUMANEVAL_KEYS = frozenset({"task_id", "prompt", "canonical_solution", "test", "entry_point"})
_MBPP_KEYS = frozenset({"task_id", "code", "test_list"})
_GSM8K_KEYS = frozenset({"question", "answer"})
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_FINAL_ANSWER = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)


def _prompt_context(prompt: str, entry_point: str) -> str:
    """What the prompt defines besides the entry point: imports, helpers, constants."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, MemoryError, RecursionError):
        lines = prompt.splitlines()
        return "\n".join(ln for ln in lines if ln.startswith(("import ", "from ")))
    parts = [
        ast.get_source_segment(prompt, node) or ""
        for node in tree.body
        if not (isinstance(node, ast.FunctionDef) and node.name == entry_point)
    ]
    return "\n\n".join(p for p in parts if p)


def from_humaneval(row: Row, index: int) -> Problem:
    """One ``check(candidate)`` test; ``setup`` holds the prompt's imports and helpers."""
    prompt = required_text(row, "prompt")
    entry_point = required_text(row, "entry_point")
    return Problem(
        id=str(row["task_id"]),
        prompt=prompt,
        entry_point=entry_point,
        tests=[TestCase(name="check", kind="check", code=required_text(row, "test"))],
        setup=_prompt_context(prompt, entry_point),
        reference_solution=prompt + str(row.get("canonical_solution") or ""),
        source="humaneval",
    )


def _called_function(assert_line: str, reference: str) -> str:
    """The function an MBPP assert tests: the first one it calls that is not a builtin."""
    try:
        tree = ast.parse(assert_line)
    except (SyntaxError, MemoryError, RecursionError):  # the last two: nested too deeply
        raise ValueError(f"test is not valid Python: {assert_line[:60]!r}") from None
    calls = [
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    defined = re.findall(r"^def\s+(\w+)", reference, re.MULTILINE)
    for name in calls:
        if name in defined:
            return name
    for name in calls:
        if not hasattr(builtins, name):
            return name
    raise ValueError(f"cannot tell which function the test calls: {assert_line[:60]!r}")


def from_mbpp(row: Row, index: int) -> Problem:
    """Assert tests (``test_list`` then ``challenge_test_list``); full or sanitized config."""
    text = required_text(row, "text" if "text" in row else "prompt")
    asserts = [t for t in row.get("test_list") or [] if isinstance(t, str) and t.strip()]
    if not asserts:
        raise ValueError("'test_list' holds no assert")
    challenge = [
        t for t in row.get("challenge_test_list") or [] if isinstance(t, str) and t.strip()
    ]
    reference = str(row.get("code") or "").replace("\r\n", "\n")
    setup = row.get("test_setup_code") or "\n".join(row.get("test_imports") or [])
    tests = [TestCase(name=f"test_{i}", kind="assert", code=t) for i, t in enumerate(asserts, 1)]
    tests += [
        TestCase(name=f"challenge_{i}", kind="assert", code=t) for i, t in enumerate(challenge, 1)
    ]
    listed = "\n".join(asserts)
    return Problem(
        id=f"mbpp/{row['task_id']}",
        prompt=f"{text}\n\nYour code should pass these tests:\n\n{listed}\n",
        entry_point=_called_function(asserts[0], reference),
        tests=tests,
        setup=setup,
        reference_solution=reference or None,
        source="mbpp",
    )


def _without_thousands(number: str) -> str:
    """``1,234`` → ``1234``; a comma that is not a thousands separator is kept."""
    return number.replace(",", "") if _THOUSANDS.fullmatch(number) else number


def from_gsm8k(row: Row, index: int) -> Problem:
    """A math problem; the ``#### N`` line of ``answer`` is the expected number."""
    found = _FINAL_ANSWER.findall(required_text(row, "answer"))
    if not found:
        raise ValueError("'answer' has no final '#### N' line")
    return Problem(
        id=f"gsm8k/{index}",
        prompt=required_text(row, "question"),
        kind="math",
        entry_point=None,
        tests=[TestCase(name="answer", kind="answer", expected=_without_thousands(found[-1]))],
        source="gsm8k",
    )


def detect(row: Row) -> tuple[str, RowMapper] | None:
    """The dataset format a row is in, or None for tracegen's own format."""
    keys = row.keys()
    if keys >= _HUMANEVAL_KEYS:
        return "HumanEval", from_humaneval
    if keys >= _MBPP_KEYS:
        return "MBPP", from_mbpp
    if keys >= _GSM8K_KEYS and "tests" not in keys:
        return "GSM8K", from_gsm8k
    return contest_format(row)
