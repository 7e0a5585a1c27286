"""Bad input through every command: one line on stderr, the right exit status, no traceback.

`CASES` is the table of what a user sees. In a command line, ``{name}`` is a file of
`files`: ``{missing}`` does not exist, ``{empty}`` is empty, ``{binary}`` holds machine code,
``{truncated}`` is JSON cut in the middle, ``{old_problem}`` / ``{old_trace}`` are records of
another schema version, ``{trace}`` is a valid trace file, ``{solutions}`` a valid solutions
file, ``{csv}`` some other text file, ``{folder}`` a directory, ``{host}`` a loopback Ollama
server that has ``test-model``, ``{dead_host}`` a port where nothing listens (``{dead_host_key}``
the same with a password in the URL). The hostile files of `HOSTILE` (deep nesting, YAML
alias bombs, integers beyond 64 bits, a 200 MB line, a trace of 100,000 steps…) are made
once per module. Leading ``NAME=value`` words are environment variables. Exit status 2 is
bad input, 1 a server that cannot be used. Every command line must use less than
`CPU_SECONDS` of CPU time (and end within `WALL_SECONDS`) and `PEAK_MB` of memory.

Each command line is a process of its own (about 0.6 s of CPU), so the fast tier runs the first
case of each command and the rest of the module is `slow`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.fake_ollama import FakeOllama
from tests.support.measure import Measured, run_measured
from tests.support.runs import child_env, command
from tests.support.scenarios import TRACEBACK, error_line, unused_port
from tests.support.traces import markers_trace, native_tools_trace
from tracegen.schema import Trace

CPU_SECONDS = 10
WALL_SECONDS = 60
"""A hang guard: wall time is stretched by other jobs on a busy machine, CPU time is not."""
PEAK_MB = 200
PASSWORD = "hunter2-secret"


UNKNOWN_SANDBOX = r"sandbox \(flag\): expected one of auto, bwrap, builtin, rlimit, got 'docker'"
"""`run`, `verify` and `doctor` refuse a bad ``--sandbox`` in the same words."""


@dataclass(frozen=True)
class Case:
    id: str
    argv: str
    exit: int
    line: str
    """Regular expression the one line on stderr matches (``{name}`` are file paths)."""


CASES = [
    # ---------------------------------------------------------------- run
    Case("run: unknown mode", "run --mode chatty", 2, r"unknown mode 'chatty'; known: markers"),
    Case(
        "run: negative concurrency",
        "run --concurrency -1",
        2,
        r"concurrency \(flag\): .*greater than or equal to 1",
    ),
    Case(
        "run: negative concurrency from the environment",
        "TRACEGEN_CONCURRENCY=-4 run",
        2,
        r"concurrency \(environment\): .*greater than or equal to 1",
    ),
    Case("run: no samples", "run --num-samples 0", 2, r"num-samples \(flag\)"),
    Case("run: negative limit", "run --limit -3", 2, r"limit \(flag\)"),
    Case("run: too many logprobs", "run --top-logprobs 21", 2, r"top-logprobs \(flag\)"),
    Case("run: unknown sandbox", "run --sandbox docker", 2, UNKNOWN_SANDBOX),
    Case("run: unknown problem id", "run --problem-ids nope", 2, r"unknown problem id 'nope'"),
    Case("run: missing problems file", "run --problems {missing}", 2, r"'{missing}': not a file"),
    Case("run: empty problems file", "run --problems {empty}", 2, r"{empty}: holds no problems"),
    Case("run: binary problems file", "run --problems {binary}", 2, r"{binary}:1: not valid JSON"),
    Case(
        "run: truncated problems file",
        "run --problems {truncated}",
        2,
        r"{truncated}:1: not valid JSON",
    ),
    Case(
        "run: problem of another schema version",
        "run --problems {old_problem}",
        2,
        r"{old_problem}:1: .*'tracegen.problem/1'",
    ),
    Case("run: missing config file", "run --config {missing}", 2, r"config file not found"),
    Case("run: binary config file", "run --config {binary}", 2, r"{binary}: not valid TOML"),
    Case(
        "run: missing prompts folder", "run --prompts-dir {missing}", 2, r"{missing}: .*not found"
    ),
    Case("run: output is a folder", "run -o {folder}", 2, r"{folder}: is a directory"),
    Case("run: empty output name", "run -o ''", 2, r"output \(flag\): .*'\.' names no file"),
    Case("run: empty model name", "run --model ''", 2, r"model \(flag\): .*at least 1 character"),
    Case(
        "run: output is a problem file",
        "run -o {old_problem}",
        2,
        r"{old_problem}.*not a tracegen",
    ),
    Case(
        "run: output is some other file, left as it was",
        "run -o {csv}",
        2,
        r"{csv}.*not a tracegen",
    ),
    Case(
        "run: host that is not a URL", "run --host http://[::1", 2, r"hosts \(flag\): .*not a URL"
    ),
    Case(
        "run: host port from the environment that is not a number",
        "OLLAMA_HOST=gpu1:abc run",
        2,
        r"hosts \(environment\): .*'http://gpu1:abc' is not a URL",
    ),
    Case(
        "run: unreachable host",
        "run --host {dead_host} --model test-model -o {fresh}",
        1,
        r"{dead_host}.*ollama serve",
    ),
    Case(
        "run: the same unreachable host twice",
        "run --host {dead_host} --host {dead_host}/ --model test-model -o {fresh}",
        1,
        r"{dead_host}.*ollama serve",
    ),
    Case(
        "run: unknown model",
        "run --host {host} --model ghost --mode markers --limit 1 -o {fresh}",
        1,
        r"model ghost not found .*ollama pull ghost",
    ),
    Case("run: shard out of range", "run --shard 4/4", 2, r"--shard 4/4: the index must be 0 to 3"),
    Case(
        "run: shard auto outside a job array",
        "run --shard auto",
        2,
        r"--shard auto: no job-array task in the environment",
    ),
    Case("run: unknown executor", "run --executor spark", 2, r"executor \(flag\)"),
    # ---------------------------------------------------------------- merge, status
    Case(
        "merge: a glob matching nothing", "merge {fresh} '{folder}/*.jsonl'", 2, r"no file matches"
    ),
    Case("merge: not a shard", "merge {fresh} {trace}", 2, r"{trace}: not a shard's output"),
    Case("merge: a missing shard file", "merge {fresh} {missing}", 2, r"{missing}: no such file"),
    Case(
        "status: not a sharded run", "status {trace}", 2, r"not shards of a `tracegen run --shard`"
    ),
    # ---------------------------------------------------------------- convert
    Case("convert: missing file", "convert {missing} --chat-format", 2, r"{missing}: no such file"),
    Case(
        "convert: binary file",
        "convert {binary} --chat-format -o {fresh}",
        2,
        r"{binary}:1: not valid JSON",
    ),
    Case(
        "convert: truncated JSON",
        "convert {truncated} --sharegpt -o {fresh}",
        2,
        r"{truncated}:1: not valid JSON",
    ),
    Case(
        "convert: trace of another schema version",
        "convert {old_trace} --training-format -o {fresh}",
        2,
        r"{old_trace}:1: .*'tracegen.trace/1'",
    ),
    Case(
        "convert: no format",
        "convert {trace} -o {fresh}",
        2,
        r"choose exactly one of --chat-format",
    ),
    Case(
        "convert: output over the input",
        "convert {trace} --chat-format -o {trace}",
        2,
        r"would overwrite the input",
    ),
    # ---------------------------------------------------------------- stats
    Case("stats: missing file", "stats {missing}", 2, r"{missing}: no such file"),
    Case("stats: binary file, strict", "stats --strict {binary}", 2, r"{binary}:1: not valid JSON"),
    Case(
        "stats: truncated JSON, strict",
        "stats --strict {truncated}",
        2,
        r"{truncated}:1: not valid JSON",
    ),
    Case(
        "stats: another schema version, strict",
        "stats --strict {old_trace}",
        2,
        r"{old_trace}:1: .*tracegen.trace/1",
    ),
    Case("stats: unknown breakdown", "stats {trace} --by colour", 2, r"--by"),
    # ---------------------------------------------------------------- show
    Case("show: missing file", "show {missing}", 2, r"{missing}: no such file"),
    Case("show: empty file", "show {empty}", 2, r"{empty}: no trace at index 0"),
    Case("stats: empty file", "stats {empty}", 2, r"{empty}: holds no traces"),
    Case(
        "convert: empty file",
        "convert {empty} --chat-format -o {fresh} --parquet {fresh}.parquet --to-hf {fresh}.hf",
        2,
        r"{empty}: holds no traces",
    ),
    Case("show: binary file", "show {binary}", 2, r"{binary}:1: not valid JSON"),
    Case("show: truncated JSON", "show {truncated}", 2, r"{truncated}:1: not valid JSON"),
    Case(
        "show: another schema version",
        "show {old_trace}",
        2,
        r"{old_trace}:1: .*'tracegen.trace/1'",
    ),
    Case("show: index past the end", "show {trace} --index 7", 2, r"no trace at index 7"),
    # ---------------------------------------------------------------- verify
    Case("verify: missing file", "verify {missing}", 2, r"{missing}: no such file"),
    Case("verify: empty file", "verify {empty}", 2, r"{empty}: holds no solutions"),
    Case("verify: binary file", "verify {binary}", 2, r"{binary}:1: not valid JSON"),
    Case("verify: truncated JSON", "verify {truncated}", 2, r"{truncated}:1: not valid JSON"),
    Case(
        "verify: another schema version",
        "verify {old_problem}",
        2,
        r"{old_problem}:1: missing 'problem_id'",
    ),
    Case(
        "verify: unknown sandbox",
        "verify {solutions} --sandbox docker",
        2,
        UNKNOWN_SANDBOX,
    ),
    # ---------------------------------------------------------------- problems
    Case("problems: missing file", "problems {missing}", 2, r"'{missing}': not a file"),
    Case("problems: empty file", "problems {empty}", 2, r"{empty}: holds no problems"),
    Case("problems: binary file", "problems {binary}", 2, r"{binary}:1: not valid JSON"),
    Case("problems: truncated JSON", "problems {truncated}", 2, r"{truncated}:1: not valid JSON"),
    Case(
        "problems: another schema version",
        "problems {old_problem}",
        2,
        r"{old_problem}:1: .*'tracegen.problem/1'",
    ),
    Case("problems: negative limit", "problems --limit -1", 2, r"limit \(flag\)"),
    # ---------------------------------------------------------------- doctor
    Case("doctor: missing config file", "doctor --config {missing}", 2, r"config file not found"),
    Case("doctor: unknown sandbox", "doctor --sandbox docker", 2, UNKNOWN_SANDBOX),
    Case("doctor: host of another protocol", "doctor --host ftp://gpu1", 2, r"not an http://"),
    # ---------------------------------------------------------------- flags click cannot read
    Case("run: unknown flag", "run --colour", 2, r"No such option: --colour .*tracegen run --help"),
    Case("run: seed written as a float", "run --seed 1e20", 2, r"Invalid value for '--seed'"),
    Case("show: no file", "show", 2, r"Missing argument 'file'"),
    Case("problems: limit that is not a number", "problems --limit nan", 2, r"'--limit'"),
    # ---------------------------------------------------------------- numbers out of range
    Case(
        "run: seed beyond 64 bits",
        "run --seed 100000000000000000000",
        2,
        r"seed \(flag\): .*less than or equal to 9223372036854775807",
    ),
    Case(
        "run: context size beyond the maximum",
        "run --num-ctx 100000000000000000000000",
        2,
        r"num-ctx \(flag\): .*less than or equal to 16777216",
    ),
    Case(
        "run: max tokens beyond 64 bits in the config",
        "run --config {bigint_toml}",
        2,
        r"max-tokens \({bigint_toml}\): .*less than or equal to 16777216",
    ),
    Case(
        "run: seed beyond 64 bits from the environment",
        "TRACEGEN_SEED=100000000000000000000 run",
        2,
        r"seed \(environment\): .*less than or equal to",
    ),
    Case(
        "run: NaN concurrency in the config",
        "run --config {nan_toml}",
        2,
        r"concurrency \({nan_toml}\): .*finite number",
    ),
    Case(
        "run: infinite temperature", "run --temperature inf", 2, r"temperature \(flag\): .*finite"
    ),
    Case(
        "run: huge concurrency in the config",
        "run --config {huge_toml}",
        2,
        r"concurrency \({huge_toml}\): .*less than or equal to 1024",
    ),
    Case(
        "run: huge concurrency",
        "run --concurrency 100000",
        2,
        r"concurrency \(flag\): .*less than or equal to 1024",
    ),
    Case(
        "run: huge sample count",
        "run --num-samples 1000000000",
        2,
        r"num-samples \(flag\): .*less than or equal to 10000",
    ),
    Case(
        "run: execution timeout below 1 ms",
        "run --exec-timeout 1e-9",
        2,
        r"exec-timeout \(flag\): .*greater than or equal to 0.001",
    ),
    Case(
        "run: empty problem ids",
        "run --problem-ids ''",
        2,
        r"problem-ids \(flag\): .*no problem id",
    ),
    Case("problems: empty problem ids", "problems --problem-ids ' , '", 2, r"names no problem id"),
    Case(
        "run: deeply nested config",
        "run --config {deep_toml}",
        2,
        r"{deep_toml}: not valid TOML: values nested too deeply",
    ),
    # ---------------------------------------------------------------- hostile problem files
    Case(
        "run: YAML alias bomb",
        "run --problems {bomb_yaml}",
        2,
        r"{bomb_yaml}:\d+: YAML aliases expand to more than 100,000 nodes",
    ),
    Case(
        "problems: YAML with 200,000 aliases",
        "problems {aliases_yaml}",
        2,
        r"{aliases_yaml}:4: YAML aliases expand to more than 100,000 nodes",
    ),
    Case(
        "problems: a 1.3 MB YAML whose aliases expand to 200 MB",
        "problems {wide_yaml} --json",
        2,
        r"{wide_yaml}:\d+: YAML aliases expand to more than 16 MB",
    ),
    Case(
        "problems: YAML alias inside its own anchor",
        "problems {recursive_yaml}",
        2,
        r"{recursive_yaml}:1: alias \*a of no complete anchor",
    ),
    Case(
        "problems: YAML nested 5,000 deep",
        "problems {deep_yaml}",
        2,
        r"{deep_yaml}:4: YAML nested more than 100 deep",
    ),
    Case(
        "problems: JSON test arguments nested 300 deep",
        "problems --json {deep_json}",
        2,
        r"{deep_json}:1: .*tests.0.args: .*values nested more than 64 deep",
    ),
    Case(
        "problems: JSON nested 100,000 deep",
        "problems {deeper_json}",
        2,
        r"{deeper_json}:1: not valid JSON \(depth limit exceeded",
    ),
    Case(
        "problems: integer beyond 64 bits in a YAML test",
        "problems --json {bigint_yaml}",
        2,
        r"{bigint_yaml}:1: .*an integer beyond 64 bits",
    ),
    Case(
        "verify: problems with an integer beyond 64 bits",
        "verify {solutions} --problems {bigint_yaml}",
        2,
        r"{bigint_yaml}:1: .*an integer beyond 64 bits",
    ),
    Case(
        "problems: NaN in a YAML test",
        "problems --json {nan_yaml}",
        2,
        r"{nan_yaml}:1: .*NaN or Infinity",
    ),
    Case(
        "problems: MBPP test nested too deeply for Python",
        "problems {deep_mbpp}",
        2,
        r"{deep_mbpp}:1: not a valid MBPP problem: test is not valid Python",
    ),
    # ---------------------------------------------------------------- hostile trace files
    Case(
        "convert: a 200 MB line",
        "convert {huge_line} --chat-format -o {fresh}",
        2,
        r"{huge_line}:2: line of 200 MB exceeds the 64 MB cap \(TRACEGEN_MAX_LINE_BYTES\)",
    ),
    Case(
        "stats: a 200 MB line, strict",
        "stats --strict {huge_line}",
        2,
        r"{huge_line}:2: line of 200 MB exceeds the 64 MB cap",
    ),
    Case(
        "show: a 200 MB line",
        "show {huge_line} --index 1",
        2,
        r"{huge_line}:2: line of 200 MB exceeds the 64 MB cap",
    ),
    Case(
        "verify: a 200 MB line",
        "verify {huge_line}",
        2,
        r"{huge_line}:2: line of 200 MB exceeds the 64 MB cap",
    ),
    Case(
        "show: a line over a lowered cap",
        "TRACEGEN_MAX_LINE_BYTES=100 show {trace}",
        2,
        r"{trace}:1: line of \d+ bytes exceeds the 100 bytes cap",
    ),
    Case(
        "show: a cap that is not a number",
        "TRACEGEN_MAX_LINE_BYTES=64MB show {trace}",
        2,
        r"TRACEGEN_MAX_LINE_BYTES \(environment\): expected a number of bytes",
    ),
    Case("stats: an endless device", "stats /dev/zero", 2, r"/dev/zero: is a character device"),
    Case("show: an endless device", "show /dev/zero", 2, r"/dev/zero: is a character device"),
    Case("verify: an endless device", "verify /dev/zero", 2, r"/dev/zero: is a character device"),
    Case("problems: an endless device", "problems /dev/zero", 2, r"'/dev/zero': not a file"),
    Case(
        "verify: 200,000 solutions and a bad last line",
        "verify {many_solutions}",
        2,
        r"{many_solutions}:200001: missing 'problem_id'",
    ),
    Case(
        "convert: a sample number beyond 64 bits, to Parquet",
        "convert {wide_sample} --chat-format --parquet {fresh}.parquet",
        2,
        r"{wide_sample}:1: .*sample: .*less than or equal to 9223372036854775807",
    ),
    Case(
        "convert: logprob bytes that are not bytes",
        "convert {bad_bytes} --chat-format --keep-logprobs -o {fresh}",
        2,
        r"{bad_bytes}:1: .*tokens: \[0\]\.bytes\[0\]: expected `int` <= 255",
    ),
    Case(
        "convert: tool-call arguments nested 300 deep",
        "convert {deep_arguments} --sharegpt -o {fresh}",
        2,
        r"{deep_arguments}:1: .*(values nested more than 64 deep|recursion limit exceeded)",
    ),
    # ---------------------------------------------------------------- outputs and hosts
    Case(
        "report: output over the input",
        "report {trace} -o {trace}",
        2,
        r"{trace}: output would overwrite the input",
    ),
    Case(
        "report: output over the input through a symbolic link",
        "report {trace} -o {trace_link}",
        2,
        r"{trace}: output would overwrite the input",
    ),
    Case(
        "report: output over the input through a hard link",
        "report {trace} -o {trace_hardlink}",
        2,
        r"{trace}: output would overwrite the input",
    ),
    Case(
        "dedup: output over the input through a hard link",
        "dedup {trace} -o {trace_hardlink}",
        2,
        r"{trace}: output would overwrite the input",
    ),
    Case(
        "verify: verdicts over the solutions",
        "verify {solutions} -o {solutions}",
        2,
        r"{solutions}: output would overwrite the input",
    ),
    Case(
        "verify: verdicts over the problem file",
        "verify {solutions} --problems {problems_file} -o {problems_file}",
        2,
        r"{problems_file}: output would overwrite the input",
    ),
    Case(
        "convert: a dataset folder around the input",
        "convert {trace} --chat-format --to-hf {tmp}",
        2,
        r"{trace}: output {tmp} would replace the input's folder",
    ),
    Case(
        "convert: a folder with files tracegen did not write",
        "convert {trace} --chat-format --to-hf {foreign_dataset}",
        2,
        r"{foreign_dataset}: exists and is not a dataset tracegen wrote",
    ),
    *(
        Case(
            f"{argv.split()[0]}: a 300-character output name",
            argv,
            2,
            r"output name too long \(at most 255 bytes a name\)",
        )
        for argv in (
            "report {trace} -o {long}",
            "convert {trace} --chat-format -o {long}",
            "convert {trace} --chat-format --to-hf {long}",
            "dedup {trace} -o {long}",
            "verify {solutions} -o {long}",
            "run --host {dead_host} --model test-model -o {long}",
            "merge {long} {trace}",
        )
    ),
    Case(
        "convert: a dataset into a device",
        "convert {trace} --chat-format --to-hf /dev/null",
        2,
        r"/dev/null: is a character device, --to-hf needs a directory",
    ),
    Case(
        "run: unreachable host with a password in its URL",
        "run --host {dead_host_key} --model test-model -o {fresh}",
        1,
        r"cannot reach Ollama at http://\*\*\*@127\.0\.0\.1:\d+: is `ollama serve` running",
    ),
    Case(
        "run: host with a password that is not a URL",
        f"run --host 'http://me:{PASSWORD}@[::1'",
        2,
        r"hosts \(flag\): .*'http://\*\*\*@\[::1' is not a URL",
    ),
]

QUIET_ZERO = [
    # What is not an error (command line, a regular expression its output matches):
    # converting traces none of which passes the filter makes empty outputs that still load;
    # long traces are shown in part; outputs that are not files are written with a warning.
    (
        "convert: no trace passes the filter",
        "convert {trace} --chat-format --only-success --to-hf {fresh}.hf",
        r"converted 0 traces",
    ),
    (
        "show: a trace of 100,000 steps",
        "show {many_steps}",
        r"… 99,800 more steps not shown \(the first 200 are\)",
    ),
    ("show: one code step of 5 MB", "show {huge_code}", r"… [\d,]+ more characters not shown"),
    (
        "stats: a 200 MB line is skipped with a warning",
        "stats {huge_line}",
        r"warning: .*{huge_line}:2: line of 200 MB exceeds the 64 MB cap",
    ),
    (
        "convert: to /dev/null",
        "convert {trace} --chat-format -o /dev/null",
        r"tracegen: warning: /dev/null is a character device, not a regular file",
    ),
    (
        "verify: verdicts to /dev/null",
        "verify {solutions} -o /dev/null",
        r"tracegen: warning: /dev/null is a character device, not a regular file",
    ),
]
CSV = b"id,score\n1,0.5\n2,0.7"
"""A user's file without a final newline: pointing -o at it must not touch it."""


def valid_trace() -> bytes:
    trace = Trace(id="t1", problem_id="two_sum", mode="markers", model="m", final_code="x = 1")
    return orjson.dumps(trace.to_json()) + b"\n"


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _trace_line(trace: Trace, **changes: object) -> bytes:
    """``trace`` as a JSON line, with top-level fields changed (written by `json`, whose
    integers have no 64-bit limit)."""
    import json

    return json.dumps({**trace.to_json(), **changes}).encode() + b"\n"


def _alias_bomb() -> str:
    """A test whose arguments are nine levels of nine aliases: 387 million strings."""
    lines = ["- id: p", "  prompt: x", "  tests:", "  - name: t", "    kind: io", "    args:"]
    lines.append("    - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]")
    lines += [f"    - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def _bad_bytes() -> bytes:
    trace = markers_trace().to_json()
    trace["logprobs"][0]["tokens"][0]["bytes"] = [300]
    return orjson.dumps(trace) + b"\n"


def _deep_arguments() -> bytes:
    line = orjson.dumps(native_tools_trace().to_json()).replace(
        b'"arguments":{', b'"arguments":{"deep":' + _deep(300).encode() + b",", 1
    )
    assert b'"deep"' in line
    return line + b"\n"


def _huge_line(path: Path) -> None:
    """A valid trace, then a line of 200 MB."""
    with path.open("wb") as fh:
        fh.write(valid_trace())
        fh.write(b'{"id": "')
        block = b"a" * (1 << 20)
        for _ in range(200):
            fh.write(block)
        fh.write(b'"}\n')


PROBLEM_YAML = (
    "- id: p\n  prompt: x\n  tests:\n  - {{name: t, kind: io, args: {args}, expected: 1}}\n"
)
HOSTILE: dict[str, Callable[[], bytes | str]] = {
    "bigint_toml": lambda: "max_tokens = 100000000000000000000000\n",
    "nan_toml": lambda: "concurrency = nan\n",
    "huge_toml": lambda: "concurrency = 100000000\n",
    "deep_toml": lambda: f"seed = {_deep(100_000)}\n",
    "bomb_yaml": _alias_bomb,
    "aliases_yaml": lambda: PROBLEM_YAML.format(args="[&s lol" + ", *s" * 200_000 + "]"),
    "recursive_yaml": lambda: "- &a [*a]\n",
    "wide_yaml": lambda: PROBLEM_YAML.format(
        args="[&s " + "x" * 200_000 + ", " + ", ".join(["*s"] * 1_000) + "]"
    ),
    "deep_yaml": lambda: PROBLEM_YAML.format(args=_deep(5_000)),
    "bigint_yaml": lambda: PROBLEM_YAML.format(args="[100000000000000000000000]"),
    "nan_yaml": lambda: PROBLEM_YAML.format(args="[.nan]"),
    "deep_json": lambda: (
        '{"id": "p", "prompt": "x", "tests": [{"name": "t", "kind": "io", "args": '
        + _deep(300)
        + "}]}\n"
    ),
    "deeper_json": lambda: '{"id": "p", "tests": ' + _deep(100_000) + "}\n",
    "deep_mbpp": lambda: (
        orjson.dumps(
            {
                "task_id": 1,
                "text": "t",
                "code": "def f(): pass",
                "test_list": ["assert " + "-" * 100_000 + "f()"],
            }
        )
        + b"\n"
    ),
    "many_solutions": lambda: (
        b'{"problem_id": "two_sum", "code": "x = 1"}\n' * 200_000 + b'{"code": "x"}\n'
    ),
    "many_steps": lambda: _trace_line(
        Trace(id="t", problem_id="p", mode="markers", model="m"),
        steps=[{"kind": "think", "text": f"step {i}"} for i in range(100_000)],
    ),
    "huge_code": lambda: _trace_line(
        Trace(id="t", problem_id="p", mode="markers", model="m"),
        steps=[{"kind": "code", "text": "x = 1\n" * 1_000_000}],
    ),
    "wide_sample": lambda: _trace_line(markers_trace(), sample=2**63),
    "bad_bytes": _bad_bytes,
    "deep_arguments": _deep_arguments,
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The files of `HOSTILE` and the 200 MB line, made once (that one removed after)."""
    folder = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name, make in HOSTILE.items():
        suffix = name.rsplit("_", 1)[1] if name.endswith(("_toml", "_yaml")) else "jsonl"
        path = folder / f"{name}.{suffix}"
        data = make()
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        paths[name] = str(path)
    huge = folder / "huge_line.jsonl"
    _huge_line(huge)
    paths["huge_line"] = str(huge)
    yield paths
    huge.unlink()


@pytest.fixture
def files(tmp_path: Path, server: FakeOllama, hostile: dict[str, str]) -> dict[str, str]:
    problem = {
        "schema": "tracegen.problem/9",
        "id": "p",
        "prompt": "Write f.",
        "entry_point": "f",
        "tests": [{"name": "t", "kind": "io", "args": [1], "expected": 1}],
    }
    contents = {
        "empty": b"",
        "binary": Path("/bin/sh").read_bytes()[:4096],
        "truncated": b'{"id": "p", "prompt": "Write f.", "tests": [{"name": "t", "ki',
        "old_problem": orjson.dumps(problem) + b"\n",
        "old_trace": valid_trace().replace(b"tracegen.trace/1", b"tracegen.trace/0"),
        "trace": valid_trace(),
        "solutions": b'{"problem_id": "two_sum", "code": "x = 1"}\n',
        "csv": CSV,
    }
    paths = {name: tmp_path / f"{name}.jsonl" for name in contents}
    for name, data in contents.items():
        paths[name].write_bytes(data)
    (tmp_path / "folder").mkdir()
    (tmp_path / "trace_link.jsonl").symlink_to(paths["trace"])
    os.link(paths["trace"], tmp_path / "trace_hardlink.jsonl")
    problems_file = tmp_path / "problems_file.jsonl"
    problems_file.write_bytes(
        orjson.dumps({**problem, "id": "two_sum"} | {"schema": "tracegen.problem/1"}) + b"\n"
    )
    foreign = tmp_path / "foreign_dataset"
    foreign.mkdir()
    (foreign / "dataset_info.json").write_text("{}")
    (foreign / "notes.txt").write_text("mine")
    port = unused_port()
    return {
        **hostile,
        **{name: str(p) for name, p in paths.items()},
        "missing": str(tmp_path / "missing.jsonl"),
        "folder": str(tmp_path / "folder"),
        "tmp": str(tmp_path),
        "problems_file": str(problems_file),
        "trace_link": str(tmp_path / "trace_link.jsonl"),
        "trace_hardlink": str(tmp_path / "trace_hardlink.jsonl"),
        "foreign_dataset": str(foreign),
        "long": str(tmp_path / ("x" * 300 + ".jsonl")),
        "fresh": str(tmp_path / "fresh.jsonl"),
        "host": server.url,
        "dead_host": f"http://127.0.0.1:{port}",
        "dead_host_key": f"http://me:{PASSWORD}@127.0.0.1:{port}",
    }


def run(argv: str, files: dict[str, str], cwd: Path) -> Measured:
    """A command line of the table, with its files and environment, run in ``cwd``, measured;
    it must end in time, within its memory, print no traceback and no password."""
    words = shlex.split(argv.format(**files))
    env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    args = words[len(env) :]
    done = run_measured(command(args), env=child_env(**env), cwd=cwd, timeout=120)
    assert TRACEBACK not in done.stderr, done.stderr[-2000:]
    assert done.cpu_seconds < CPU_SECONDS, f"used {done.cpu_seconds:.1f} s of CPU"
    assert done.seconds < WALL_SECONDS, f"took {done.seconds:.1f} s"
    assert done.peak_mb < PEAK_MB, f"peak RSS {done.peak_mb:.0f} MB"
    assert PASSWORD not in done.stdout + done.stderr
    return done


def first_of_each_command(cases: list[Case]) -> list[Any]:
    """Every case, those after the first of their command marked slow."""
    params, seen = [], set()
    for case in cases:
        name = case.id.split(":", 1)[0]
        params.append(
            pytest.param(case, id=case.id, marks=pytest.mark.slow if name in seen else ())
        )
        seen.add(name)
    return params


@pytest.mark.parametrize("case", first_of_each_command(CASES))
def test_bad_input_is_one_line_and_its_exit_status(
    case: Case, files: dict[str, str], tmp_path: Path
) -> None:
    done = run(case.argv, files, tmp_path)
    line = error_line(done.stderr)
    pattern = case.line.format(**{k: re.escape(v) for k, v in files.items()})
    assert done.returncode == case.exit, done.stderr
    assert re.search(f"^tracegen: error: .*{pattern}", line), line
    assert Path(files["csv"]).read_bytes() == CSV


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "output"), [c[1:] for c in QUIET_ZERO], ids=[c[0] for c in QUIET_ZERO]
)
def test_nothing_to_summarise_or_convert_is_not_an_error(
    argv: str, output: str, files: dict[str, str], tmp_path: Path
) -> None:
    done = run(argv, files, tmp_path)
    assert done.returncode == 0, done.stderr
    pattern = output.format(**{k: re.escape(v) for k, v in files.items()})
    assert re.search(pattern, done.stdout + done.stderr)
    if "--to-hf" in argv:
        import datasets

        assert datasets.load_from_disk(f"{files['fresh']}.hf").num_rows == 0


@pytest.mark.slow
@pytest.mark.parametrize("argv", ["convert {trace} --chat-format -o {fifo}", "run -o {fifo}"])
def test_a_fifo_no_process_reads_is_refused_not_waited_on(
    argv: str, files: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = run(argv, {**files, "fifo": str(fifo)}, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tracegen: warning: {fifo} is a FIFO, not a regular file: "
        "what is written there cannot be read back",
        f"tracegen: error: {fifo}: a FIFO that no process reads",
    ]


@pytest.mark.slow
def test_a_password_in_a_host_url_is_never_printed(files: dict[str, str], tmp_path: Path) -> None:
    host = files["host"].replace("http://", f"http://me:{PASSWORD}@")
    done = run(f"doctor --host {host} --model ghost", files, tmp_path)
    assert done.returncode == 1
    assert "http://***@127.0.0.1" in done.stdout and "ollama pull ghost" in done.stdout


@pytest.mark.slow
def test_verify_streams_verdicts_of_a_huge_file_in_flat_memory(
    files: dict[str, str], tmp_path: Path
) -> None:
    """The first verdicts come out while most of 200,000 solutions wait, memory flat."""
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_bytes(b'{"problem_id": "two_sum", "code": "x = 1"}\n' * 200_000)
    proc = subprocess.Popen(
        command(["verify", str(solutions), "--json"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    try:
        assert proc.stdout is not None
        verdicts = [orjson.loads(proc.stdout.readline()) for _ in range(50)]
        status = Path(f"/proc/{proc.pid}/status").read_text()
    finally:
        proc.kill()
        proc.wait()
    assert [v["line"] for v in verdicts] == list(range(1, 51))
    assert {v["status"] for v in verdicts} == {"error"}
    peak_kb = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
    assert peak_kb < PEAK_MB * 1024
