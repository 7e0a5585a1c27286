"""Bad input through every command: one line on stderr, the right exit status, no traceback.

`CASES` is the table of what a user sees. In a command line, ``{name}`` is a file of
`files`: ``{missing}`` does not exist, ``{empty}`` is empty, ``{binary}`` holds machine code,
``{truncated}`` is JSON cut in the middle, ``{old_problem}`` / ``{old_trace}`` are records of
another schema version, ``{trace}`` is a valid trace file, ``{solutions}`` a valid solutions
file, ``{csv}`` some other text file, ``{folder}`` a directory, ``{host}`` a loopback Ollama
server that has ``test-model``, ``{dead_host}`` a port where nothing listens. Leading
``NAME=value`` words are environment variables. Exit status 2 is bad input, 1 a server that
cannot be used.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.fake_ollama import FakeOllama
from tests.reliability.conftest import TRACEBACK, child_env, error_line, tracegen, unused_port
from tracegen.schema import Trace


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
    Case("run: unknown sandbox", "run --sandbox docker", 2, r"sandbox \(flag\)"),
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
        r"--sandbox must be auto, bwrap or rlimit",
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
    Case("problems: negative limit", "problems --limit -1", 2, r"--limit must be at least 1"),
    # ---------------------------------------------------------------- doctor
    Case("doctor: missing config file", "doctor --config {missing}", 2, r"config file not found"),
    Case("doctor: unknown sandbox", "doctor --sandbox docker", 2, r"sandbox \(flag\)"),
    Case("doctor: host of another protocol", "doctor --host ftp://gpu1", 2, r"not an http://"),
]

QUIET_ZERO = [
    # What is not an error: converting traces none of which passes the filter makes empty
    # outputs that still load (command line, a regular expression its output matches).
    (
        "convert: no trace passes the filter",
        "convert {trace} --chat-format --only-success --to-hf {fresh}.hf",
        r"converted 0 traces",
    ),
]
CSV = b"id,score\n1,0.5\n2,0.7"
"""A user's file without a final newline: pointing -o at it must not touch it."""


def valid_trace() -> bytes:
    trace = Trace(id="t1", problem_id="two_sum", mode="markers", model="m", final_code="x = 1")
    return orjson.dumps(trace.to_json()) + b"\n"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def files(tmp_path: Path, server: FakeOllama) -> dict[str, str]:
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
    return {
        **{name: str(p) for name, p in paths.items()},
        "missing": str(tmp_path / "missing.jsonl"),
        "folder": str(tmp_path / "folder"),
        "fresh": str(tmp_path / "fresh.jsonl"),
        "host": server.url,
        "dead_host": f"http://127.0.0.1:{unused_port()}",
    }


def run(argv: str, files: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command line of the table, with its files and environment, run in ``cwd``."""
    words = shlex.split(argv.format(**files))
    env = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    args = words[len(env) :]
    return tracegen(args, env=child_env(**env), cwd=cwd, timeout=120)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_its_exit_status(
    case: Case, files: dict[str, str], tmp_path: Path
) -> None:
    done = run(case.argv, files, tmp_path)
    line = error_line(done.stderr)
    pattern = case.line.format(**{k: re.escape(v) for k, v in files.items()})
    assert done.returncode == case.exit, done.stderr
    assert re.search(f"^tracegen: error: .*{pattern}", line), line
    assert Path(files["csv"]).read_bytes() == CSV


@pytest.mark.parametrize(
    ("argv", "output"), [c[1:] for c in QUIET_ZERO], ids=[c[0] for c in QUIET_ZERO]
)
def test_nothing_to_summarise_or_convert_is_not_an_error(
    argv: str, output: str, files: dict[str, str], tmp_path: Path
) -> None:
    done = run(argv, files, tmp_path)
    assert done.returncode == 0, done.stderr
    assert TRACEBACK not in done.stderr
    assert re.search(output, done.stdout + done.stderr)
    if "--to-hf" in argv:
        import datasets

        assert datasets.load_from_disk(f"{files['fresh']}.hf").num_rows == 0
