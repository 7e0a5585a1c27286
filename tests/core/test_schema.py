"""Every record survives write → read unchanged, and the schema version is enforced."""

from datetime import UTC, datetime

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from tracegen.errors import JsonlError
from tracegen.jsonl import JsonlWriter, dumps, iter_records
from tracegen.schema import (
    TRACE_SCHEMA,
    ChatMessage,
    ExecResult,
    Metrics,
    Problem,
    Step,
    TestCase,
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

TOKEN = TokenLogprob(
    token="def",
    logprob=-0.25,
    bytes=[100, 101, 102],
    top_logprobs=[TopLogprob(token="def", logprob=-0.25), TopLogprob(token="class", logprob=-2.0)],
)
TESTS = [
    TestCase(name="basic", kind="io", args=[[2, 7, 11, 15], 9], expected=[0, 1]),
    TestCase(name="asserts", kind="assert", code="assert two_sum([3, 3], 6) == [0, 1]"),
    TestCase(
        name="check", kind="check", code="def check(candidate):\n    assert candidate([1], 1)"
    ),
]
PROBLEM = Problem(id="two_sum", prompt="Return indices…", entry_point="two_sum", tests=TESTS)
MATH = Problem(
    id="gsm8k/1",
    prompt="How many?",
    kind="math",
    tests=[TestCase(name="answer", kind="answer", expected="72")],
    source="gsm8k",
)
VERDICT = ExecResult(
    status="failed",
    exit_code=0,
    stdout="hi\n",
    duration_s=0.012,
    tests=[
        TestResult(name="basic", passed=True, expected="[0, 1]", actual="[0, 1]"),
        TestResult(name="dup", passed=False, expected="[0, 1]", actual="None"),
    ],
)
TRACE = Trace(
    id="t-1",
    problem_id="two_sum",
    sample=3,
    mode="inline-tools",
    model="qwen3:8b",
    hosts=["http://127.0.0.1:11434"],
    created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    settings_hash="abcd",
    messages=[
        ChatMessage(role="system", content="You solve problems."),
        ChatMessage(role="user", content="Solve two_sum."),
        ChatMessage(
            role="assistant",
            content="<think>try</think>",
            thinking="hidden",
            tool_calls=[ToolCall(function=ToolFunction(name="python", arguments={"code": "1"}))],
        ),
        ChatMessage(role="tool", content='{"stdout": "1"}', tool_name="python"),
    ],
    steps=[
        Step(kind="think", text="try", message_index=2),
        Step(kind="tool_response", text="{}", source="system", exec_index=0),
    ],
    final_code="def two_sum(n, t): ...",
    verdict=VERDICT,
    score=0.5,
    reward=0.0,
    metrics=Metrics(think_segments=2, parse_strategies={"escaped": 1}, latency_s=1.5),
    logprobs=[TurnLogprobs(message_index=2, tokens=[TOKEN])],
    logprobs_status="present",
    continuation="prefill",
    usage=Usage(requests=2, completion_tokens=10),
    error=TraceError(kind="limit", reason="max_iterations", message="5 iterations used"),
)

RECORDS: list[BaseModel] = [
    *TESTS,
    PROBLEM,
    MATH,
    VERDICT,
    TRACE,
    Trace(id="t-2", problem_id="p", mode="markers", model="m"),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_survives_write_then_read_unchanged(tmp_path, record):
    path = tmp_path / "records.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(record)
    [(lineno, back)] = list(iter_records(path, type(record)))
    assert lineno == 1
    assert back == record


def test_every_trace_line_carries_the_schema_version(tmp_path):
    assert TRACE.to_json()["schema"] == TRACE_SCHEMA
    assert Trace(id="x", problem_id="p", mode="m", model="m").to_json()["schema"] == TRACE_SCHEMA


def test_a_trace_of_another_schema_version_is_refused():
    data = TRACE.to_json() | {"schema": "tracegen.trace/2"}
    with pytest.raises(ValidationError):
        Trace.model_validate(data)


def test_a_problem_without_tests_is_refused():
    with pytest.raises(ValidationError):
        Problem(id="p", prompt="x", entry_point="f", tests=[])


def test_unknown_fields_are_an_error_not_silently_dropped():
    with pytest.raises(ValidationError):
        Trace.model_validate(TRACE.to_json() | {"scroe": 1.0})


WRITTEN_BEFORE = (
    '{"schema":"tracegen.trace/1","id":"t-1","problem_id":"add","sample":0,'
    '"mode":"markers","model":"m","hosts":[],"created_at":"2026-01-02T03:04:05Z",'
    '"settings_hash":"","messages":[],"steps":[],"final_code":null,'
    '"final_answer":null,"verdict":null,"score":0.0,"success":false,"reward":-1.0,'
    '"is_ideal":false,"metrics":{"think_segments":0,"code_blocks":0,"executions":0,'
    '"tool_calls":0,"parse_failures":0,"parse_strategies":{},"hallucinated_results":0,'
    '"turns":0,"exec_timeouts":0,"repetition_stops":0,"prompt_tokens":0,'
    '"completion_tokens":0,"generation_s":0.0,"execution_s":0.0,"latency_s":0.0},'
    '"logprobs":[{"message_index":2,"tokens":[{"token":"def","logprob":0.0,'
    '"bytes":[100,101,102],"top_logprobs":[{"token":"def","logprob":-0.25,'
    '"bytes":null},{"token":"é","logprob":-3.4028234663852886e+38,"bytes":[195,169]}],'
    '"id":755},{"token":" add","logprob":-0.00001,"bytes":null,"top_logprobs":[],'
    '"id":null}]}],"logprobs_status":"present","logprobs_kind":"unknown","sampling":null,'
    '"continuation":null,'
    '"token_requests":[],"grammars":{},"usage":{"requests":0,"prompt_tokens":0,'
    '"completion_tokens":0,"prompt_s":0.0,"generation_s":0.0,"load_s":0.0,'
    '"total_s":0.0},"error":null}'
    "\n"
).encode()
"""A trace line with logprobs as tracegen wrote it when tokens were pydantic models: ``bytes``
and ``id`` null or not, a large exponent, a small number, a non-ASCII token."""


def test_a_trace_with_logprobs_is_written_back_byte_for_byte(tmp_path):
    trace = Trace.model_validate_json(WRITTEN_BEFORE)
    assert trace.logprobs[0].tokens[0].top_logprobs[1].token == "é"
    path = tmp_path / "traces.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(trace.to_row())
        writer.write(trace)
        writer.write(TRACE.to_row())
    assert path.read_bytes().splitlines(keepends=True)[:2] == [WRITTEN_BEFORE, WRITTEN_BEFORE]
    [(_, back), _, (_, again)] = list(iter_records(path, Trace))
    assert (back, again) == (trace, TRACE)
    assert dumps(TRACE.to_row()) == dumps(TRACE)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ({"token": "a", "logprob": "likely"}, r"\[0\]\.logprob: expected `float`, got `str`"),
        ({"logprob": -1.0}, r"\[0\]: object missing required field `token`"),
        (
            {"token": "a", "logprob": -1.0, "bytes": [256]},
            r"\[0\]\.bytes\[0\]: expected `int` <= 255",
        ),
        (
            {"token": "a", "logprob": -1.0, "rank": 1},
            r"\[0\]: object contains unknown field `rank`",
        ),
        (
            {
                "token": "a",
                "logprob": -1.0,
                "top_logprobs": [{"token": "b", "logprob": -2, "id": 7}],
            },
            r"\[0\]\.top_logprobs\[0\]: object contains unknown field `id`",
        ),
    ],
    ids=["not-a-number", "no-token", "not-a-byte", "unknown-field", "unknown-alternative-field"],
)
def test_a_malformed_token_in_a_trace_file_is_one_error_saying_where(tmp_path, token, reason):
    data = TRACE.to_json()
    data["logprobs"][0]["tokens"] = [token]
    path = tmp_path / "traces.jsonl"
    path.write_bytes(orjson.dumps(data) + b"\n")
    with pytest.raises(
        JsonlError, match=rf"traces.jsonl:1: not a valid Trace: logprobs\.0\.tokens: {reason}"
    ):
        list(iter_records(path, Trace))


def test_exec_result_counts_passed_tests():
    assert (VERDICT.passed, VERDICT.total) == (1, 2)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([2**64], "an integer beyond 64 bits"),
        ([float("nan")], "NaN or Infinity"),
        ({1: 2}, "a mapping key that is not a string"),
        ([{1, 2}], "a set, which is not a JSON value"),
    ],
)
def test_test_values_that_json_cannot_carry_are_refused(value, reason):
    with pytest.raises(ValidationError, match=reason):
        TestCase(name="t", kind="io", args=[value])


def test_free_form_values_nest_at_most_64_deep_and_no_recursion_is_exhausted():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValidationError, match="values nested more than 64 deep"):
        ToolFunction(name="python", arguments={"code": "x", "deep": deep})
