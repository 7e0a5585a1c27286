"""The JSONL contract: every record tracegen writes or reads.

A trace line is a `Trace` with ``"schema": "tracegen.trace/1"``; a problem line is a
`Problem` with ``"schema": "tracegen.problem/1"``. Rename a field here and nowhere else.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tracegen.jsonl import located

TRACE_SCHEMA: Final = "tracegen.trace/1"
PROBLEM_SCHEMA: Final = "tracegen.problem/1"
MAX_INT64 = 2**63 - 1
"""Integers a record holds fit the int64 columns of Parquet and Hugging Face datasets."""
MAX_JSON_DEPTH = 64
"""How deeply free-form JSON values (test arguments, tool-call arguments) may nest."""
Index = Annotated[int, Field(ge=0, le=MAX_INT64)]
Byte = Annotated[int, msgspec.Meta(ge=0, le=255)]


def json_value(value: Any) -> Any:
    """``value`` if it can be written back as JSON unchanged, else `ValueError` saying why:
    nested at most `MAX_JSON_DEPTH` deep, string keys, integers within 64 bits, finite
    numbers, no other types (a YAML date or set). Iterative: no recursion to exhaust."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list | tuple):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"values nested more than {MAX_JSON_DEPTH} deep")
            if isinstance(item, dict):
                if not all(isinstance(k, str) for k in item):
                    raise ValueError("a mapping key that is not a string")
                item = item.values()
            todo.extend((child, depth + 1) for child in item)
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        elif isinstance(item, int):
            if not -MAX_INT64 - 1 <= item <= 2**64 - 1:
                raise ValueError("an integer beyond 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("NaN or Infinity, which JSON cannot hold")
        else:
            raise ValueError(f"a {type(item).__name__}, which is not a JSON value")
    return value


class Record(BaseModel):
    """Base of every record: unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Extended(Record):
    """A record that gained fields after it was first written: those named in ``_added``
    are left out of its JSON while they hold their default, so an older record is written
    back byte for byte (and hashes of it do not move)."""

    _added: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_default_additions(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for name in self._added:
                key = fields[name].alias or name
                if key in data and getattr(self, name) == fields[name].get_default(
                    call_default_factory=True
                ):
                    del data[key]
        return data


# ---------------------------------------------------------------- problems


TestKind = Literal["io", "assert", "check", "answer", "stdio", "functional"]


class TestCase(Extended):
    """One test of a problem.

    - ``io``: call the entry point with ``args``/``kwargs`` and compare with ``expected``
      (JSON values; tuples compare equal to lists).
    - ``assert``: ``code`` holds assert statements that call the entry point by name.
    - ``check``: ``code`` defines ``check(candidate)`` (HumanEval style).
    - ``answer``: a math problem's final answer, compared by number with ``expected``.
    - ``stdio``: a program reads ``input`` (on stdin, or in the problem's ``input_file``) and
      its output is compared with ``expected`` (a string) by the problem's `Comparison`.
    - ``functional``: a program's entry point (``Solution.method`` for LeetCode's
      ``Solution().method(*args)``) is called with ``args`` and its value compared with
      ``expected`` as JSON values.

    ``private`` tests decide the verdict and are never shown to the model; the public ones
    are what a prompt and execution feedback may show.
    """

    __test__ = False
    _added = ("input", "private")

    name: str
    kind: TestKind
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    code: str | None = None
    input: str | None = None
    private: bool = False

    _json_values = field_validator("args", "kwargs", "expected")(json_value)

    @model_validator(mode="after")
    def _program_test_shape(self) -> TestCase:
        if self.kind == "stdio" and (self.input is None or not isinstance(self.expected, str)):
            raise ValueError("a stdio test needs 'input' and 'expected' as strings")
        return self


Language = Literal["python", "cpp", "java"]
LANGUAGES: Final[tuple[Language, ...]] = ("python", "cpp", "java")

CompareRule = Literal["tokens", "lines", "exact", "checker"]


class Comparison(Record):
    """How a program's output is compared with a test's expected output.

    - ``tokens`` (default): the whitespace-separated tokens must be equal, all of them (never
      a prefix: truncated or extra output fails); with ``float_tolerance`` a token that reads
      as a number matches within that absolute or relative error.
    - ``lines``: lines equal after stripping trailing whitespace, trailing blank lines ignored.
    - ``exact``: byte for byte.
    - ``checker``: the ``checker`` program (``checker_language``) decides, run in the sandbox
      with three file paths. ``checker_protocol`` ``open-r1`` (open-r1/codeforces'
      ``generated_checker``): ``checker input expected actual``, accepted when it exits 0 and
      the last token it prints is ``1``; ``testlib``: ``checker input actual expected``,
      accepted when it exits 0, wrong when it exits 1 or 2, a checker failure otherwise.
    """

    rule: CompareRule = "tokens"
    float_tolerance: float | None = Field(default=None, ge=0)
    checker: str | None = None
    checker_language: Language = "python"
    checker_protocol: Literal["open-r1", "testlib"] = "open-r1"
    unwrap_single: bool = False
    """Functional tests (APPS/TACO's grader): an expected one-element list also accepts
    its element as the value returned."""

    @model_validator(mode="after")
    def _checker_given(self) -> Comparison:
        if (self.rule == "checker") != (self.checker is not None):
            raise ValueError("'checker' is given exactly when the rule is 'checker'")
        return self


class ProgramLimits(Record):
    """A program problem's limits per test (scaled by the judge's ``time_scale``)."""

    time_s: float = Field(default=2.0, gt=0, le=600)
    memory_mb: int = Field(default=256, ge=16, le=65536)


class Problem(Extended):
    """A task for the model, with the tests that score it."""

    _added = ("language", "limits", "compare", "input_file", "output_file", "starter_code")

    schema_: Literal["tracegen.problem/1"] = Field(default=PROBLEM_SCHEMA, alias="schema")
    id: str
    prompt: str
    kind: Literal["code", "math"] = "code"
    entry_point: str | None = None
    tests: list[TestCase] = Field(min_length=1)
    setup: str = ""
    reference_solution: str | None = None
    source: str = "builtin"
    tags: list[str] = Field(default_factory=list)
    language: Language | None = None
    """The language solutions are expected in (None: the solution says, else Python)."""
    limits: ProgramLimits | None = None
    """Time and memory per test of a program problem (None: `ProgramLimits`' defaults)."""
    compare: Comparison | None = None
    """How ``stdio`` outputs are compared (None: tokens)."""
    input_file: str | None = None
    """The file the program reads its input from instead of stdin (``input.txt``)."""
    output_file: str | None = None
    """The file the program writes its output to instead of stdout."""
    starter_code: str | None = None

    @property
    def is_program(self) -> bool:
        """Whether the problem is judged by running a whole program per test."""
        return any(t.kind in ("stdio", "functional") for t in self.tests)

    @property
    def public_tests(self) -> list[TestCase]:
        return [t for t in self.tests if not t.private]

    @model_validator(mode="after")
    def _functional_tests_name_their_entry_point(self) -> Problem:
        if not self.entry_point and any(t.kind == "functional" for t in self.tests):
            raise ValueError("functional tests need an entry_point (name or Class.method)")
        return self

    @field_validator("input_file", "output_file")
    @classmethod
    def _plain_file_name(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v or v in (".", "..") or "\0" in v):
            raise ValueError("must be a plain file name")
        return v


# ---------------------------------------------------------------- messages


class ToolFunction(Record):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    index: int | None = None

    _json_arguments = field_validator("arguments")(json_value)


class ToolCall(Record):
    """A structured tool call, in Ollama's shape (``arguments`` is a JSON object)."""

    id: str | None = None
    function: ToolFunction


Role = Literal["system", "user", "assistant", "tool"]


class ChatMessage(Record):
    """One message exactly as exchanged with the model server."""

    role: Role
    content: str = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None


# ---------------------------------------------------------------- logprobs


class TopLogprob(msgspec.Struct, gc=False):
    """An alternative to a sampled token."""

    token: str
    logprob: float
    bytes: list[Byte] | None = None


class TokenLogprob(msgspec.Struct, kw_only=True, gc=False):
    """One sampled token; ``id`` is its token id where the backend returned ids.

    Tokens are lean msgspec structs, not pydantic models: an answer has hundreds, each read
    from the server and written to the trace. `token_records` converts a list in one call.
    They are left out of the garbage collector's passes (``gc=False``): they hold no cycle."""

    token: str
    logprob: float
    bytes: list[Byte] | None = None
    top_logprobs: list[TopLogprob] = msgspec.field(default_factory=list)
    id: int | None = None


_TOKEN_FIELDS = frozenset(TokenLogprob.__struct_fields__)
_TOP_FIELDS = frozenset(TopLogprob.__struct_fields__)


def token_records(entries: Any) -> list[TokenLogprob]:
    """``entries`` (``{token, logprob, bytes, top_logprobs, id}`` objects as parsed from JSON,
    or tokens already) as tokens, converted in one call; fields beyond a token's are ignored.
    A malformed entry is a `ValueError` saying where: ``[3].logprob: expected `float`, got
    `str```."""
    try:
        return msgspec.convert(entries, list[TokenLogprob])
    except msgspec.ValidationError as e:
        where, why = located(e)
        raise ValueError(f"{where}: {why}" if where else why) from None


def _recorded_tokens(value: Any) -> list[TokenLogprob]:
    """The tokens of a record: `token_records`, and a field no token has is an error, as in
    every record. Tokens tracegen built (structs, not dicts) pass unchecked."""
    try:
        tokens = token_records(value)
    except ValueError as e:
        reason: str | None = str(e)
    else:
        reason = _unknown_field(value) if tokens and isinstance(value[0], dict) else None
    if reason is not None:
        raise PydanticCustomError("tokens", "{reason}", {"reason": reason})
    return tokens


def _unknown_field(entries: list[Any]) -> str | None:
    """Where the first field of ``entries`` that a token (or an alternative) has not is."""
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        for j, alternative in enumerate(entry.get("top_logprobs") or ()):
            if isinstance(alternative, dict) and not alternative.keys() <= _TOP_FIELDS:
                unknown = min(alternative.keys() - _TOP_FIELDS)
                return f"[{i}].top_logprobs[{j}]: object contains unknown field `{unknown}`"
        if not entry.keys() <= _TOKEN_FIELDS:
            return f"[{i}]: object contains unknown field `{min(entry.keys() - _TOKEN_FIELDS)}`"
    return None


Tokens = Annotated[
    list[TokenLogprob],
    PlainValidator(_recorded_tokens),
    PlainSerializer(msgspec.to_builtins),
]
"""A list of `TokenLogprob` as a field of a pydantic record: converted by msgspec in one
call, dumped as the same JSON objects a pydantic model would be."""


class TurnLogprobs(Record):
    """The tokens of one assistant turn; ``message_index`` points into ``Trace.messages``."""

    message_index: Index
    tokens: Tokens


class TokenRequest(Record):
    """One model request exactly as the model saw it, where the backend returned token ids:
    the ids of the whole prompt it was given and of every token it sampled (a stop string's
    token included), with each sampled token's logprob. ``message_index`` is the assistant
    message the completion went into. Consecutive requests of an episode share a prefix
    when the next prompt extends the previous prompt and completion: the ids between are
    what tracegen wrote (results, tool responses)."""

    message_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None = None


# ---------------------------------------------------------------- execution


ExecStatus = Literal[
    "ok", "failed", "error", "timeout", "memory", "killed", "output-limit", "runtime", "compile"
]

Outcome = Literal[
    "accepted", "wrong", "time", "memory", "runtime", "compile", "output-limit", "error", "skipped"
]
"""A program test's outcome: ``wrong`` (ran fine, output rejected), ``time`` (wall or CPU
limit), ``memory``, ``runtime`` (non-zero exit status or a signal), ``compile``,
``output-limit``, ``error`` (the sandbox or tracegen failed: never the program's fault),
``skipped`` (not run: an earlier test failed)."""


class TestResult(Extended):
    __test__ = False
    _added = ("outcome", "private", "cpu_s")

    name: str
    passed: bool
    expected: str | None = None
    actual: str | None = None
    error: str | None = None
    outcome: Outcome | None = None
    """Program tests only (None for the others)."""
    private: bool = False
    cpu_s: float | None = None


class ExecResult(Extended):
    """What one sandboxed execution did. ``status`` is ``ok`` only when every test passed."""

    _added = ("outcome",)

    status: ExecStatus
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    tests: list[TestResult] = Field(default_factory=list)
    error: str | None = None
    outcome: Outcome | None = None
    """Program problems: ``accepted``, or the outcome of the first test that failed."""

    @property
    def passed(self) -> int:
        return sum(t.passed for t in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)


# ---------------------------------------------------------------- traces


StepKind = Literal[
    "think",
    "code",
    "verify",
    "result",
    "error",
    "plan",
    "reflection",
    "tool_call",
    "tool_response",
    "answer",
    "text",
]


class Step(Record):
    """A typed piece of the conversation. ``source`` says who wrote it: the model or tracegen."""

    kind: StepKind
    text: str
    source: Literal["model", "system"] = "model"
    message_index: int | None = None
    parse_strategy: str | None = None
    exec_index: int | None = None
    language: Language | None = None
    """A code step's language when its fence names C++ or Java (```` ```java ````)."""


class Metrics(Record):
    think_segments: int = 0
    code_blocks: int = 0
    executions: int = 0
    tool_calls: int = 0
    parse_failures: int = 0
    parse_strategies: dict[str, int] = Field(default_factory=dict)
    hallucinated_results: int = 0
    turns: int = 0
    exec_timeouts: int = 0
    repetition_stops: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generation_s: float = 0.0
    execution_s: float = 0.0
    latency_s: float = 0.0


_LEGACY_USAGE = {
    "prompt_eval_count": ("prompt_tokens", 1),
    "eval_count": ("completion_tokens", 1),
    "total_duration_ns": ("total_s", 1e-9),
    "load_duration_ns": ("load_s", 1e-9),
    "prompt_eval_duration_ns": ("prompt_s", 1e-9),
    "eval_duration_ns": ("generation_s", 1e-9),
}


class Usage(Record):
    """Totals of what the server reported over an episode, whatever the backend: tokens, and
    durations in seconds (zero where the server said nothing)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_s: float = 0.0
    generation_s: float = 0.0
    load_s: float = 0.0
    total_s: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _read_legacy(cls, data: Any) -> Any:
        """Traces written before usage was backend-neutral carry Ollama's counters."""
        if not isinstance(data, dict) or not any(k in data for k in _LEGACY_USAGE):
            return data
        out = {k: v for k, v in data.items() if k not in _LEGACY_USAGE}
        for old, (new, scale) in _LEGACY_USAGE.items():
            if old in data and new not in out:
                value = data[old]
                out[new] = value * scale if isinstance(value, int | float) else value
        return out


class TraceError(Record):
    """Why an episode failed. ``reason`` is a stable code stats can group by."""

    kind: Literal["backend", "limit", "sandbox", "parse", "internal"]
    reason: str
    message: str


LogprobsStatus = Literal["present", "absent", "not_requested"]
LogprobsKind = Literal["raw", "processed", "unknown"]
"""Which distribution a trace's logprobs are of: ``raw``, the model's own (log-softmax of its
logits, before temperature and truncation); ``processed``, the one the sampler drew from
(after `Sampling`); ``unknown``, not known (a server that does not say, traces written
before tracegen recorded it)."""


class Sampling(Record):
    """The sampler's settings as tracegen sent them (None: left to the server), which turn
    the model's raw distribution into the one sampled from."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None


ContinueMethod = Literal["prefill", "raw", "continue"]
"""How a partial assistant message was continued (each backend documents what each means)."""


def _now() -> datetime:
    return datetime.now(UTC)


class ToolPath(Record):
    """How ``native-tools`` gave the model its tools and read its calls back."""

    tools: Literal["template", "request"]
    """``template``: tracegen rendered ``tools=`` through the model's chat template itself
    (the embedded model); ``request``: ``tools`` went in the request and the server rendered
    them with the model's template."""
    parser: str | None = None
    """The family parser that read calls the model wrote as text (None: each format in turn)."""
    server_calls: Index = 0
    """Calls the server handed back already parsed (structured ``tool_calls``)."""
    text_calls: Index = 0
    """Calls tracegen read from the text with ``parser``."""


class Trace(Record):
    """One episode: the exact conversation, its typed steps, the verdict and the metrics."""

    schema_: Literal["tracegen.trace/1"] = Field(default=TRACE_SCHEMA, alias="schema")
    """The record's format and version."""
    id: str
    """Stable and unique per problem, sample, mode, model and settings."""
    problem_id: str
    """The problem the episode solved."""
    sample: Index = 0
    """Which sample of the problem (0, 1, …)."""
    mode: str
    """The conversation protocol (docs: Modes)."""
    model: str
    """The model as the server knows it (or the embedded model's name)."""
    hosts: list[str] = Field(default_factory=list)
    """The servers that answered the episode's requests."""
    created_at: datetime = Field(default_factory=_now)
    """When the episode ended (UTC)."""
    settings_hash: str = ""
    """A hash of the settings and system prompt that shaped it: resume refuses to mix them."""
    messages: list[ChatMessage] = Field(default_factory=list)
    """The exact messages exchanged, system prompt first."""
    steps: list[Step] = Field(default_factory=list)
    """Typed steps (think, code, result, tool call…), each marked as written by the model or
    the system."""
    final_code: str | None = None
    """The program judged: the mode's final code."""
    final_answer: str | None = None
    """A math problem's answer, as the final program printed it."""
    verdict: ExecResult | None = None
    """The judge's result: status and per-test results on the problem's tests."""
    score: float = 0.0
    """Tests passed / tests."""
    success: bool = False
    """Every test passed."""
    reward: float = -1.0
    """``2·score − 1`` plus structure bonuses, in [−1, 1] (docs: Training)."""
    is_ideal: bool = False
    """Success and the mode's structure criteria (docs: Modes)."""
    metrics: Metrics = Field(default_factory=Metrics)
    """Counts: think segments, code blocks, executions, tool calls, parse failures, turns."""
    logprobs: list[TurnLogprobs] = Field(default_factory=list)
    """Per assistant turn, each sampled token's logprob (and id where the server gave ids)."""
    logprobs_status: LogprobsStatus = "not_requested"
    """``present``, ``absent`` (the server returned none) or ``not_requested``."""
    logprobs_kind: LogprobsKind = "unknown"
    """Which distribution the logprobs come from: ``raw``, ``processed`` or ``unknown``."""
    sampling: Sampling | None = None
    """The sampler's settings (None in traces written before tracegen recorded them)."""
    continuation: ContinueMethod | None = None
    """How ``inline-tools`` continued its message (prefill, raw, continue)."""
    token_requests: list[TokenRequest] = Field(default_factory=list)
    """Per model request, where the backend knows token ids: the ids of the whole prompt the
    model saw and of every token it sampled (a stop string's included)."""
    grammars: dict[str, str] = Field(default_factory=dict)
    """The grammars decoding was constrained to (name → sha256 of the GBNF text); empty when
    it was not. Logprobs of a constrained trace describe the model, not the masked sampler."""
    tool_path: ToolPath | None = None
    """``native-tools``: how the tools reached the model and how its calls were read (left out
    of the JSON when unset)."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens and timings of the episode's requests."""
    error: TraceError | None = None
    """Why the episode failed (kind, reason, message); absent when it did not."""

    @field_validator("score")
    @classmethod
    def _score_in_range(cls, v: float) -> float:
        if not 0.0 <= v <= 1.0:
            raise ValueError("score must be within [0, 1]")
        return v

    @property
    def key(self) -> tuple[str, int, str, str]:
        """What resume matches on: (problem, sample, mode, model)."""
        return (self.problem_id, self.sample, self.mode, self.model)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_row(self) -> dict[str, Any]:
        """`to_json` made faster for `tracegen.jsonl.dumps`: the tokens of the logprobs
        (most of a trace) are left as they are, not walked by pydantic, for the writer to
        dump one at a time (never all held as dicts at once)."""
        data = self.model_dump(mode="json", by_alias=True, exclude=_NO_TOKENS)
        for turn, dumped in zip(self.logprobs, data["logprobs"], strict=True):
            dumped["tokens"] = turn.tokens
        return data

    @model_serializer(mode="wrap")
    def _without_unset_additions(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Fields added after traces were first written (`ADDED_LATER`) are left out while
        unset, so a trace without them is written back byte for byte."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ADDED_LATER:
                if data.get(name, 0) is None:
                    del data[name]
        return data


ADDED_LATER: Final = ("tool_path",)


_NO_TOKENS: Final = {"logprobs": {"__all__": {"tokens"}}}
