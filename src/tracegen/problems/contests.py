"""Map rows of competitive-programming datasets to program `Problem`s.

Each format is recognised by its fields (`contest_format`), rows as the datasets ship them:

- **deepmind/code_contests** (``contest_problem.proto``): ``name``, ``description``,
  ``public_tests``/``private_tests``/``generated_tests`` as ``{input: [...], output: [...]}``,
  ``time_limit {seconds, nanos}``, ``memory_limit_bytes``, ``input_file``/``output_file``.
- **codeparrot/apps** and **BAAI/TACO**: ``question``, ``input_output`` a JSON *string*
  ``{inputs, outputs, fn_name?}``, ``starter_code``; APPS has ``problem_id``, TACO none (its
  id is the row index, as its card numbers rows) and limits as text (``"2 seconds"``,
  ``"256 megabytes"``). Call-based tests pass when the value equals the expected one or,
  the expected one being a one-element list, its element (APPS' ``testing_util.py``).
- **livecodebench/code_generation_lite** (``lcb_runner/benchmarks/code_generation.py``):
  ``question_id``, ``question_content``, ``public_test_cases`` JSON, ``private_test_cases``
  JSON or base64 → zlib → pickle → JSON (`decode_lcb_tests`: only a pickled plain string
  is accepted), ``metadata.func_name``, ``starter_code``. Outputs compared by LiveCodeBench's
  own rule (``lines``); functional inputs are one JSON value per line.
- **open-r1/codeforces**: ``id``, ``title``, ``description``, ``input_format``,
  ``output_format``, ``examples``, ``official_tests``, ``time_limit`` (s), ``memory_limit``
  (MB), ``input_mode`` (``stdio``|``file``: ``input.txt``/``output.txt``),
  ``generated_checker`` (a Python checker, open-r1's protocol).
- **agentica-org/DeepCoder-Preview-Dataset**: ``problem``, ``tests`` a JSON string (a list
  of ``{input, output, testtype|type}`` or TACO's ``{inputs, outputs, fn_name}``),
  ``metadata``; ids are row indexes.
- **open-r1/verifiable-coding-problems-python**: ``problem_id``, ``prompt``,
  ``verification_info`` ``{language, test_cases: [{input, output, type, fn_name}]}``.

Public tests are what the dataset shows the model (its examples); where a dataset does not
say (APPS, TACO, DeepCoder, verifiable-coding-problems), the first test is public and the
rest private.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable
from typing import Any, Final

from tracegen.schema import Comparison, Problem, ProgramLimits, TestCase

Row = dict[str, Any]
MAX_DECODED: Final = 1 << 30
"""The most bytes a compressed test list may expand to."""
LCB_PRELUDE: Final = (
    "from typing import *\nfrom collections import *\nfrom functools import *\n"
    "from itertools import *\nfrom heapq import *\nfrom bisect import *\nfrom math import *\n"
    "import math, heapq, bisect, itertools, functools, collections, string, re, sys\n"
)
"""What LiveCodeBench's grader imports before a functional program (``import_string``)."""
LCB_LIMITS: Final = ProgramLimits(time_s=6, memory_mb=1024)
"""LiveCodeBench's grader: 6 s per test, no memory limit of its own."""


class _StringsOnly(pickle.Unpickler):
    """An unpickler that builds no object of any class: a global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}")


def _unpickled_string(text: str) -> str:
    """base64 → zlib → pickle of a plain string, read without building any object."""
    try:
        packed = base64.b64decode(text.encode(), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_DECODED)
    except (ValueError, zlib.error) as e:
        raise ValueError(f"private_test_cases is neither JSON nor base64+zlib: {e}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"private_test_cases expands to more than {MAX_DECODED} bytes")
    try:
        inner = _StringsOnly(io.BytesIO(raw)).load()
    except Exception as e:  # any malformed or refused pickle
        raise ValueError(f"private_test_cases: not a pickled string ({e})") from None
    if type(inner) is not str:
        raise ValueError(f"private_test_cases: a pickled {type(inner).__name__}, not a string")
    return inner


def decode_lcb_tests(text: str) -> list[Any]:
    """LiveCodeBench's private tests: JSON, or base64 → zlib → pickle of a JSON string.

    The pickle is read by an unpickler that refuses every global (no class, no function can
    be called) and the result must be a plain ``str``; decompression stops at `MAX_DECODED`.
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = json.loads(_unpickled_string(text))
    if not isinstance(value, list):
        raise ValueError("test cases must be a list")
    return value


def required_text(row: Row, key: str) -> str:
    """``row[key]``, a string with more than white space in it, or `ValueError`."""
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key!r} must be a non-empty string")
    return value


def _json(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as e:
            raise ValueError(f"{what} is not valid JSON: {e}") from None
    return value


def _lines(value: Any) -> str:
    """A test's input or output: a string, or a list of lines (APPS writes both)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _stdio(name: str, given: Any, expected: Any, *, private: bool) -> TestCase:
    return TestCase(
        name=name, kind="stdio", input=_lines(given), expected=_lines(expected), private=private
    )


def _entry_point(fn_name: str, starter_code: str | None) -> str:
    if starter_code and re.search(r"^\s*class\s+Solution\b", starter_code, re.MULTILINE):
        return f"Solution.{fn_name}"
    return fn_name


def _with_starter(prompt: str, starter_code: str | None) -> str:
    if starter_code and starter_code.strip():
        return f"{prompt.rstrip()}\n\nStart from this code:\n\n{starter_code.rstrip()}\n"
    return prompt


def _first_public(tests: list[TestCase]) -> list[TestCase]:
    return [t.model_copy(update={"private": i > 0}) for i, t in enumerate(tests)]


# ---------------------------------------------------------------- code_contests


def from_code_contests(row: Row, index: int) -> Problem:
    tests: list[TestCase] = []
    for field, private in (
        ("public_tests", False),
        ("private_tests", True),
        ("generated_tests", True),
    ):
        group = row.get(field) or {}
        inputs, outputs = group.get("input") or [], group.get("output") or []
        if len(inputs) != len(outputs):
            raise ValueError(f"{field!r} has {len(inputs)} inputs and {len(outputs)} outputs")
        tests += [
            _stdio(f"{field.split('_')[0]}_{i}", given, expected, private=private)
            for i, (given, expected) in enumerate(zip(inputs, outputs, strict=True), 1)
        ]
    if not tests:
        raise ValueError("no tests")
    limit = row.get("time_limit") or {}
    seconds = float(limit.get("seconds") or 0) + float(limit.get("nanos") or 0) / 1e9
    memory = int(row.get("memory_limit_bytes") or 0) >> 20
    return Problem(
        id=str(row["name"]),
        prompt=required_text(row, "description"),
        tests=tests,
        limits=ProgramLimits(
            time_s=seconds or ProgramLimits().time_s,
            memory_mb=max(16, memory) if memory else ProgramLimits().memory_mb,
        ),
        input_file=row.get("input_file") or None,
        output_file=row.get("output_file") or None,
        source="code_contests",
    )


# ---------------------------------------------------------------- APPS and TACO

_AMOUNT = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3}
_MEGABYTES = {"": 1.0, "mb": 1.0, "megabyte": 1.0, "megabytes": 1.0, "kb": 1 / 1024}
_MEGABYTES |= {"gb": 1024.0, "gigabyte": 1024.0, "gigabytes": 1024.0}


def _amount(text: Any, units: dict[str, float]) -> float | None:
    """``"2 seconds"`` → 2.0 with ``_SECONDS``; None where the text holds no such amount."""
    if isinstance(text, int | float):
        return float(text) or None
    found = _AMOUNT.search(text) if isinstance(text, str) else None
    if found is None or found[2].lower() not in units:
        return None
    return float(found[1]) * units[found[2].lower()] or None


def _call_based(
    inputs: list[Any], outputs: list[Any], fn_name: str, starter: str | None
) -> tuple[str, list[TestCase]]:
    tests = []
    for i, (args, expected) in enumerate(zip(inputs, outputs, strict=True), 1):
        if not isinstance(args, list):
            raise ValueError(f"test {i}: call-based inputs must be a list of arguments")
        tests.append(TestCase(name=f"test_{i}", kind="functional", args=args, expected=expected))
    return _entry_point(fn_name, starter), tests


def _apps_like(row: Row, problem_id: str, source: str) -> Problem:
    spec = _json(row.get("input_output"), "'input_output'")
    if not isinstance(spec, dict):
        raise ValueError("'input_output' holds no tests")
    inputs, outputs = spec.get("inputs") or [], spec.get("outputs") or []
    if not inputs or len(inputs) != len(outputs):
        raise ValueError("'input_output' needs as many inputs as outputs, at least one")
    starter = row.get("starter_code") or None
    entry = None
    compare = None
    if spec.get("fn_name"):
        entry, tests = _call_based(inputs, outputs, str(spec["fn_name"]), starter)
        compare = Comparison(unwrap_single=True)
    else:
        tests = [
            _stdio(f"test_{i}", given, expected, private=False)
            for i, (given, expected) in enumerate(zip(inputs, outputs, strict=True), 1)
        ]
    time_s = _amount(row.get("time_limit"), _SECONDS)
    memory = _amount(row.get("memory_limit"), _MEGABYTES)
    limits = None
    if time_s or memory:
        limits = ProgramLimits(
            time_s=time_s or ProgramLimits().time_s,
            memory_mb=max(16, int(memory)) if memory else ProgramLimits().memory_mb,
        )
    return Problem(
        id=problem_id,
        prompt=_with_starter(required_text(row, "question"), starter),
        entry_point=entry,
        tests=_first_public(tests),
        limits=limits,
        compare=compare,
        starter_code=starter,
        language="python" if entry else None,
        source=source,
    )


def from_apps(row: Row, index: int) -> Problem:
    return _apps_like(row, str(row["problem_id"]), "apps")


def from_taco(row: Row, index: int) -> Problem:
    return _apps_like(row, str(index), "taco")


# ---------------------------------------------------------------- LiveCodeBench


def _lcb_tests(cases: list[Any], func: str | None, *, private: bool, start: int) -> list[TestCase]:
    tests = []
    for i, case in enumerate(cases, start):
        if not isinstance(case, dict):
            raise ValueError(f"test {i} is not an object")
        name = f"{'private' if private else 'public'}_{i}"
        if case.get("testtype") == "functional":
            if not func:
                raise ValueError("a functional test but no metadata.func_name")
            args = [json.loads(line) for line in str(case["input"]).split("\n")]
            expected = json.loads(case["output"])
            tests.append(
                TestCase(
                    name=name, kind="functional", args=args, expected=expected, private=private
                )
            )
        else:
            tests.append(_stdio(name, case["input"], case["output"], private=private))
    return tests


def from_livecodebench(row: Row, index: int) -> Problem:
    metadata = _json(row.get("metadata") or "{}", "'metadata'")
    func = metadata.get("func_name") if isinstance(metadata, dict) else None
    public = _json(row.get("public_test_cases") or "[]", "'public_test_cases'")
    private = decode_lcb_tests(row.get("private_test_cases") or "[]")
    tests = _lcb_tests(public, func, private=False, start=1)
    tests += _lcb_tests(private, func, private=True, start=1)
    if not tests:
        raise ValueError("no tests")
    starter = row.get("starter_code") or None
    functional = any(t.kind == "functional" for t in tests)
    return Problem(
        id=str(row["question_id"]),
        prompt=_with_starter(required_text(row, "question_content"), starter),
        entry_point=_entry_point(func, starter) if functional and func else None,
        tests=tests,
        setup=LCB_PRELUDE if functional else "",
        limits=LCB_LIMITS,
        compare=Comparison(rule="lines"),
        starter_code=starter,
        language="python" if functional else None,
        source="livecodebench",
    )


# ---------------------------------------------------------------- open-r1/codeforces


def _codeforces_prompt(row: Row) -> str:
    parts = [f"# {row.get('title') or row['id']}", required_text(row, "description")]
    for key, title in (("input_format", "Input"), ("output_format", "Output")):
        if row.get(key):
            parts.append(f"## {title}\n\n{row[key]}")
    for i, example in enumerate(row.get("examples") or [], 1):
        parts.append(
            f"## Example {i}\n\nInput:\n```\n{example.get('input', '')}\n```\n"
            f"Output:\n```\n{example.get('output', '')}\n```"
        )
    if row.get("note"):
        parts.append(f"## Note\n\n{row['note']}")
    return "\n\n".join(parts)


def from_codeforces(row: Row, index: int) -> Problem:
    tests = [
        _stdio(f"example_{i}", t["input"], t["output"], private=False)
        for i, t in enumerate(row.get("examples") or [], 1)
    ]
    tests += [
        _stdio(f"official_{i}", t["input"], t["output"], private=True)
        for i, t in enumerate(row.get("official_tests") or [], 1)
    ]
    if not tests:
        raise ValueError("no tests")
    file_mode = row.get("input_mode") == "file"
    checker = row.get("generated_checker") or None
    return Problem(
        id=str(row["id"]),
        prompt=_codeforces_prompt(row),
        tests=tests,
        limits=ProgramLimits(
            time_s=float(row.get("time_limit") or ProgramLimits().time_s),
            memory_mb=max(16, int(row.get("memory_limit") or ProgramLimits().memory_mb)),
        ),
        compare=Comparison(rule="checker", checker=checker) if checker else None,
        input_file="input.txt" if file_mode else None,
        output_file="output.txt" if file_mode else None,
        source="codeforces",
    )


# ---------------------------------------------------------------- DeepCoder, verifiable


def _listed_tests(
    cases: Any, func: str | None, starter: str | None
) -> tuple[str | None, list[TestCase]]:
    """Tests given as a list of ``{input, output, testtype|type, fn_name?}`` or as TACO's
    ``{inputs, outputs, fn_name}``; the entry point of call-based ones."""
    if isinstance(cases, dict):
        inputs, outputs = cases.get("inputs") or [], cases.get("outputs") or []
        if len(inputs) != len(outputs):
            raise ValueError("as many inputs as outputs are needed")
        if cases.get("fn_name"):
            return _call_based(inputs, outputs, str(cases["fn_name"]), starter)
        cases = [{"input": i, "output": o} for i, o in zip(inputs, outputs, strict=True)]
    if not isinstance(cases, list):
        raise ValueError("tests must be a list")
    func = func or next(
        (c.get("fn_name") for c in cases if isinstance(c, dict) and c.get("fn_name")), None
    )
    tests: list[TestCase] = []
    for i, case in enumerate(cases, 1):
        kind = case.get("testtype") or case.get("type") or "stdin"
        if kind in ("functional", "function_call"):
            if not func:
                raise ValueError("a functional test without a function name")
            given = case["input"]
            args = (
                [json.loads(line) for line in given.split("\n")]
                if isinstance(given, str)
                else given
            )
            expected = _json(case["output"], f"test {i} output")
            tests.append(
                TestCase(name=f"test_{i}", kind="functional", args=args, expected=expected)
            )
        else:
            tests.append(_stdio(f"test_{i}", case["input"], case["output"], private=False))
    functional = any(t.kind == "functional" for t in tests)
    return (_entry_point(func, starter) if functional and func else None), tests


def from_deepcoder(row: Row, index: int) -> Problem:
    metadata = _json(row.get("metadata") or "{}", "'metadata'")
    func = metadata.get("func_name") if isinstance(metadata, dict) else None
    starter = row.get("starter_code") or None
    cases = _json(row["tests"], "'tests'")
    entry, tests = _listed_tests(cases, func, starter)
    if not tests:
        raise ValueError("no tests")
    # TACO's call-based tests (outputs wrapped in a list) are graded as TACO grades them.
    taco_call = isinstance(cases, dict) and bool(cases.get("fn_name"))
    return Problem(
        id=str(index),
        prompt=_with_starter(required_text(row, "problem"), starter),
        entry_point=entry,
        tests=_first_public(tests),
        compare=Comparison(unwrap_single=True) if taco_call else None,
        language="python" if entry else None,
        starter_code=starter,
        source="deepcoder",
    )


def from_verifiable(row: Row, index: int) -> Problem:
    info = _json(row["verification_info"], "'verification_info'")
    if not isinstance(info, dict):
        raise ValueError("'verification_info' must be an object")
    entry, tests = _listed_tests(info.get("test_cases") or [], None, None)
    if not tests:
        raise ValueError("no tests")
    language = info.get("language")
    return Problem(
        id=str(row["problem_id"]),
        prompt=required_text(row, "prompt"),
        entry_point=entry,
        tests=_first_public(tests),
        language="cpp" if language in ("cpp", "c++") else "python",
        source="verifiable-coding-problems",
    )


RowMapper = Callable[[Row, int], Problem]

CONTEST_FORMATS: Final[list[tuple[str, frozenset[str], RowMapper]]] = [
    ("code_contests", frozenset({"name", "description", "public_tests"}), from_code_contests),
    (
        "LiveCodeBench",
        frozenset({"question_id", "question_content", "public_test_cases"}),
        from_livecodebench,
    ),
    ("Codeforces", frozenset({"id", "description", "official_tests"}), from_codeforces),
    ("APPS", frozenset({"problem_id", "question", "input_output"}), from_apps),
    ("TACO", frozenset({"question", "input_output"}), from_taco),
    (
        "verifiable-coding-problems",
        frozenset({"problem_id", "prompt", "verification_info"}),
        from_verifiable,
    ),
    ("DeepCoder", frozenset({"problem", "tests"}), from_deepcoder),
]
"""Competitive-programming formats, each recognised by the fields its rows always have."""


def contest_format(row: Row) -> tuple[str, RowMapper] | None:
    """The competitive-programming dataset a row comes from, if any."""
    keys = row.keys()
    for name, needed, mapper in CONTEST_FORMATS:
        if keys >= needed and (name != "DeepCoder" or isinstance(row.get("tests"), str)):
            return name, mapper
    return None
