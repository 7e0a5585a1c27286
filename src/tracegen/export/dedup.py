"""`tracegen dedup`: drop exact and near-duplicate solutions, keeping the best of each cluster.

Two traces are duplicates when they answer the same problem with the same normalised final
code (``--by code``: Python tokens without comments, blank lines or layout) or the same
assistant text (``--by text``: lower-cased words), and near-duplicates when the Jaccard
similarity of their 5-token shingles, estimated with MinHash and found with LSH
(`tracegen.export.minhash`), is at least ``--threshold``. Clusters are the connected groups of such
pairs; of each one the best trace is kept: success first, then ideal, then reward, then the
earliest in the file. Traces without the chosen key (no final code, no assistant text) are
always kept.

Two passes over the file: the first keeps one small record per trace (a hash, a 512-byte
MinHash signature, its LSH band keys, the ranking fields), the second copies the kept lines
byte for byte.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import msgspec
import orjson

from tracegen.errors import ConfigError, InputFileError
from tracegen.export.curate import check_paths, optional_jsonl, step, writing
from tracegen.export.lines import decode_trace
from tracegen.export.minhash import Index, signature, similarity
from tracegen.jsonl import iter_raw_lines_at
from tracegen.terminal import printable

By = Literal["code", "text"]
BY: tuple[By, ...] = ("code", "text")
SHINGLE = 5
_WORD = re.compile(r"\S+")
_CODE_TOKEN = re.compile(
    r'''"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|#[^\n]*|\w+|[^\s\w]'''
)


class _Message(msgspec.Struct):
    role: str = ""
    content: str = ""
    thinking: str | None = None


class _Line(msgspec.Struct):
    schema: str = ""
    id: str = ""
    problem_id: str = ""
    success: bool = False
    is_ideal: bool = False
    reward: float = 0.0
    final_code: str | None = None
    messages: list[_Message] = []


_DECODER = msgspec.json.Decoder(_Line)


def code_tokens(code: str) -> list[str]:
    """The tokens of Python ``code``: names, numbers, strings, operators; no comments or layout."""
    return [t for t in _CODE_TOKEN.findall(code) if not t.startswith("#")]


def text_tokens(line: _Line) -> list[str]:
    """The lower-cased words of everything the assistant wrote (thinking included)."""
    parts = [f"{m.thinking or ''} {m.content}" for m in line.messages if m.role == "assistant"]
    return _WORD.findall(" ".join(parts).lower())


def shingles(tokens: list[str]) -> set[str]:
    """Overlapping runs of `SHINGLE` tokens (the whole sequence when it is shorter)."""
    if len(tokens) <= SHINGLE:
        return {"\x1f".join(tokens)}
    return {"\x1f".join(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)}


@dataclass
class _Clusters:
    """Union-find over trace indices."""

    parent: dict[int, int] = field(default_factory=dict)

    def find(self, i: int) -> int:
        root = i
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(i, i) != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass
class DedupResult:
    traces: int = 0
    kept: int = 0
    exact: int = 0
    near: int = 0
    clusters: int = 0
    without_key: int = 0

    def summary(self, by: By, threshold: float) -> str:
        return (
            f"dedup by {by} (threshold {threshold}): kept {self.kept} of {self.traces} traces; "
            f"removed {self.exact} exact and {self.near} near duplicates "
            f"from {self.clusters} clusters"
            + (
                f"; {self.without_key} traces without {by} kept as they are"
                if self.without_key
                else ""
            )
        )


@dataclass(slots=True)
class _Entry:
    id: str
    problem: str
    rank: tuple[bool, bool, float]
    digest: bytes
    first: int


def _tokens(line: _Line, by: By) -> list[str]:
    if by == "code":
        return code_tokens(line.final_code) if line.final_code else []
    return text_tokens(line)


def find_duplicates(
    source: Path, by: By, threshold: float
) -> tuple[dict[int, _Entry], dict[int, tuple[int, str, float]], DedupResult]:
    """First pass: the traces with a key, and for each removed one (index → (kept index, kind,
    estimated similarity))."""
    lsh = Index(threshold)
    entries: dict[int, _Entry] = {}
    exact: dict[tuple[str, bytes], int] = {}
    clusters = _Clusters()
    result = DedupResult()
    for index, (lineno, _, raw) in enumerate(iter_raw_lines_at(source)):
        line = decode_trace(_DECODER, raw, source, lineno)
        result.traces += 1
        tokens = _tokens(line, by)
        if not tokens:
            result.without_key += 1
            continue
        digest = hashlib.blake2b("\x1f".join(tokens).encode(), digest_size=16).digest()
        first = exact.setdefault((line.problem_id, digest), index)
        rank = (line.success, line.is_ideal, line.reward)
        entries[index] = _Entry(line.id, line.problem_id, rank, digest, first)
        if first != index:
            clusters.union(first, index)
            continue
        sig = signature(shingles(tokens))
        for other in lsh.similar(sig):
            if entries[other].problem == line.problem_id:
                clusters.union(other, index)
        lsh.add(index, sig)
    members: dict[int, list[int]] = {}
    for index in entries:
        members.setdefault(clusters.find(index), []).append(index)
    removed: dict[int, tuple[int, str, float]] = {}
    for group in members.values():
        if len(group) == 1:
            continue
        result.clusters += 1
        best = max(group, key=lambda i: (*entries[i].rank, -i))
        for i in group:
            if i == best:
                continue
            if entries[i].digest == entries[best].digest:
                removed[i] = (best, "exact", 1.0)
                result.exact += 1
            else:
                estimate = similarity(
                    lsh.signature(entries[i].first), lsh.signature(entries[best].first)
                )
                removed[i] = (best, "near", estimate)
                result.near += 1
    result.kept = result.traces - len(removed)
    return entries, removed, result


def _write_removed(
    out: IO[bytes] | None, entries: dict[int, _Entry], removed: dict[int, tuple[int, str, float]]
) -> None:
    if out is None:
        return
    for index, (kept, kind, estimate) in sorted(removed.items()):
        row = {
            "id": entries[index].id,
            "problem_id": entries[index].problem,
            "duplicate_of": entries[kept].id,
            "kind": kind,
            "similarity": round(estimate, 3),
        }
        out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))


def dedup_command(
    *,
    input: Path,
    output: Path,
    by: str = "code",
    threshold: float = 0.85,
    removed_file: Path | None = None,
) -> DedupResult:
    """Write ``input`` without its duplicates to ``output``; a one-line summary on stderr."""
    if by not in BY:
        raise ConfigError(f"--by: expected code or text, got {by!r}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"--threshold: expected a number in (0, 1], got {threshold}")
    check_paths(input, output, removed_file)
    key: By = "code" if by == "code" else "text"
    entries, removed, result = find_duplicates(input, key, threshold)
    if result.traces == 0:
        raise InputFileError(f"{input}: holds no traces")
    record = step(
        "dedup",
        input,
        by=key,
        threshold=threshold,
        traces=result.traces,
        kept=result.kept,
        removed_exact=result.exact,
        removed_near=result.near,
        clusters=result.clusters,
    )
    with writing(output, input, record) as out, optional_jsonl(removed_file) as side:
        for index, (_, _, raw) in enumerate(iter_raw_lines_at(input)):
            if index not in removed:
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
        _write_removed(side, entries, removed)
    print(printable(result.summary(key, threshold)), file=sys.stderr)
    return result
