"""`load_problems`: resolve a source name or path, check ids are unique, select."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tracegen.data import data_dir
from tracegen.errors import ConfigError, ProblemFileError
from tracegen.problems.files import Located, read_problem_file
from tracegen.problems.hub import HUB_DATASETS, load_hub
from tracegen.schema import Problem


def shipped_sets() -> dict[str, Path]:
    """Problem sets shipped with tracegen, by name (``builtin`` and any other)."""
    return {p.name.removesuffix(".jsonl"): p for p in data_dir("problems").glob("*.jsonl")}


def source_names() -> list[str]:
    return [*sorted(shipped_sets()), *HUB_DATASETS]


def _locate(source: str) -> Iterable[Located]:
    shipped = shipped_sets()
    if source in shipped:
        return read_problem_file(shipped[source], source=source)
    if source in HUB_DATASETS:
        spec = HUB_DATASETS[source]
        return ((f"{spec.path} row {i}", p) for i, p in enumerate(load_hub(source)))
    path = Path(source).expanduser()
    if path.is_file():
        return read_problem_file(path)
    if path.is_dir():
        raise ConfigError(f"{source}: is a directory, not a problem file")
    names = ", ".join(source_names())
    raise ConfigError(f"unknown problem source {source!r}: not a file, nor one of {names}")


def _unique(located: Iterable[Located]) -> list[Problem]:
    seen: dict[str, str] = {}
    problems = []
    for where, problem in located:
        if problem.id in seen:
            raise ProblemFileError(
                f"{where}: duplicate problem id {problem.id!r} (first at {seen[problem.id]})"
            )
        seen[problem.id] = where
        problems.append(problem)
    return problems


def select(
    problems: list[Problem],
    *,
    limit: int | None = None,
    problem_ids: list[str] | None = None,
    source: str = "builtin",
) -> list[Problem]:
    """Keep the problems named in ``problem_ids`` (in source order), then the first ``limit``."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    if problem_ids:
        known = {p.id for p in problems}
        missing = [i for i in problem_ids if i not in known]
        if missing:
            examples = ", ".join(repr(p.id) for p in problems[:3])
            raise ConfigError(
                f"unknown problem id {missing[0]!r} in {source} (its ids look like {examples})"
            )
        wanted = set(problem_ids)
        problems = [p for p in problems if p.id in wanted]
    return problems if limit is None else problems[:limit]


def load_problems(
    source: str = "builtin",
    *,
    limit: int | None = None,
    problem_ids: list[str] | None = None,
) -> list[Problem]:
    """Load a problem set: a shipped set name, ``humaneval``/``mbpp``/``gsm8k``, or a file."""
    problems = _unique(_locate(source))
    if not problems:
        raise ProblemFileError(f"{source}: holds no problems")
    return select(problems, limit=limit, problem_ids=problem_ids, source=source)
