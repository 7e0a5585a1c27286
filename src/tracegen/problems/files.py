"""Read problem files: tracegen JSONL or YAML, and HumanEval/MBPP/GSM8K JSONL (plain or .gz).

Each reader yields ``(where, problem)`` pairs, ``where`` being ``FILE:LINE`` (or, for a
YAML item without a position, ``FILE:item N``) for error messages.

YAML is checked before anything is built from it: nesting deeper than `MAX_YAML_DEPTH`,
an alias inside its own anchor, or aliases standing for more than `MAX_ALIAS_NODES` nodes
or `MAX_ALIAS_BYTES` bytes of text in all (a "billion laughs" file, or a few large blocks
repeated) are refused with the line where it happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tracegen.errors import InputFileError, ProblemFileError
from tracegen.jsonl import iter_lines
from tracegen.problems.formats import detect
from tracegen.schema import Problem

Located = tuple[str, Problem]
YAML_SUFFIXES = (".yaml", ".yml")
MAX_YAML_DEPTH = 100
_TOO_DEEP = f"YAML nested more than {MAX_YAML_DEPTH} deep"
MAX_ALIAS_NODES = 100_000
MAX_ALIAS_BYTES = 16 << 20
"""Bytes of scalar text aliases may add to a YAML file, in all."""
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _explain(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def problem_from_row(row: Any, where: str, source: str) -> Problem:
    """Validate one problem in tracegen's format; errors name ``where``."""
    if not isinstance(row, dict):
        raise ProblemFileError(f"{where}: expected a problem (a mapping), got {type(row).__name__}")
    if not row.get("tests"):
        raise ProblemFileError(f"{where}: problem {row.get('id', '?')!r} has no tests")
    try:
        return Problem.model_validate({"source": source, **row})
    except ValidationError as e:
        raise ProblemFileError(f"{where}: not a valid problem: {_explain(e)}") from None


def _read_jsonl(path: Path, source: str) -> Iterator[Located]:
    try:
        for index, (lineno, row) in enumerate(iter_lines(path)):
            where = f"{path}:{lineno}"
            found = detect(row)
            if found is None:
                yield where, problem_from_row(row, where, source)
                continue
            name, mapper = found
            try:
                yield where, mapper(row, index)
            except (ValueError, KeyError, TypeError) as e:
                raise ProblemFileError(f"{where}: not a valid {name} problem: {e}") from None
    except ProblemFileError:
        raise
    except InputFileError as e:
        raise ProblemFileError(str(e)) from None


def _check_yaml_shape(text: str, path: Path) -> None:
    """Walk the YAML events (no recursion, nothing built): refuse deep nesting and aliases
    that would expand to too much. Counts nodes and bytes of scalar text, each alias as many
    as its anchor holds."""
    held: dict[str, tuple[int, int]] = {}
    open_nodes: list[tuple[str | None, int, int]] = []
    added = added_bytes = 0
    for event in yaml.parse(text, Loader=_Loader):
        where = f"{path}:{event.start_mark.line + 1}" if event.start_mark else str(path)
        if isinstance(event, _OPEN):
            if len(open_nodes) >= MAX_YAML_DEPTH:
                raise ProblemFileError(f"{where}: {_TOO_DEEP}")
            open_nodes.append((event.anchor, 1, 0))
            continue
        if isinstance(event, _CLOSE):
            anchor, nodes, size = open_nodes.pop()
            if anchor is not None:
                held[anchor] = (nodes, size)
        elif isinstance(event, yaml.ScalarEvent):
            nodes, size = 1, len(event.value)
            if event.anchor is not None:
                held[event.anchor] = (nodes, size)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in held:
                raise ProblemFileError(f"{where}: alias *{event.anchor} of no complete anchor")
            nodes, size = held[event.anchor]
            added += nodes
            added_bytes += size
            if added > MAX_ALIAS_NODES:
                raise ProblemFileError(
                    f"{where}: YAML aliases expand to more than {MAX_ALIAS_NODES:,} nodes"
                )
            if added_bytes > MAX_ALIAS_BYTES:
                raise ProblemFileError(
                    f"{where}: YAML aliases expand to more than {MAX_ALIAS_BYTES >> 20} MB"
                )
        else:
            continue
        if open_nodes:
            anchor, count, total = open_nodes[-1]
            open_nodes[-1] = (anchor, count + nodes, total + size)


def _yaml_items(path: Path) -> tuple[list[Any], list[str]]:
    """The problem items of a YAML file and where each one starts."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemFileError(f"{path}: cannot read: {e}") from None
    loader = _Loader(text)
    try:
        _check_yaml_shape(text, path)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        reason = getattr(e, "problem", None) or str(e).splitlines()[0]
        if "maximum nesting depth" in reason:  # libyaml's own limit, met while scanning ahead
            raise ProblemFileError(f"{where}: {_TOO_DEEP}") from None
        raise ProblemFileError(f"{where}: not valid YAML: {reason}") from None
    finally:
        loader.dispose()
    if node is not None and isinstance(data, dict) and isinstance(data.get("problems"), list):
        extra = sorted(set(data) - {"problems", "schema"})
        if extra:
            raise ProblemFileError(f"{path}: unknown top-level key {extra[0]!r}")
        item_nodes = next(v.value for k, v in node.value if k.value == "problems")
        items = data["problems"]
    elif node is not None and isinstance(data, list):
        item_nodes, items = node.value, data
    else:
        raise ProblemFileError(f"{path}: expected a list of problems or a 'problems:' mapping")
    wheres = [
        f"{path}:{n.start_mark.line + 1}" if n.start_mark else f"{path}:item {i}"
        for i, n in enumerate(item_nodes)
    ]
    return items, wheres


def _read_yaml(path: Path, source: str) -> Iterator[Located]:
    items, wheres = _yaml_items(path)
    for item, where in zip(items, wheres, strict=True):
        yield where, problem_from_row(item, where, source)


def read_problem_file(path: Path, source: str | None = None) -> Iterator[Located]:
    """Problems of one file; ``source`` (default: the file's stem) labels tracegen-format ones."""
    label = source or path.name.split(".")[0]
    if path.suffix.lower() in YAML_SUFFIXES:
        return _read_yaml(path, label)
    return _read_jsonl(path, label)
