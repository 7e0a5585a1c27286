"""The dataset card `tracegen convert --to-hf` writes: ``README.md`` with Hugging Face metadata.

It states where the data came from: the tracegen version, the model(s) and backend hosts,
the modes, the settings hashes (with the settings themselves when the run's state file
``TRACES.state`` is beside the traces), the problem sources, counts, success and ideal rates,
the filters applied by `convert`, and the curation steps (`dedup`, `decontaminate`) recorded
in ``TRACES.tracegen.json``. The ``license`` is left for the user to fill in.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec
import orjson
import yaml

from tracegen import __version__
from tracegen.export.lines import decode_trace
from tracegen.export.sidecar import read_steps
from tracegen.jsonl import iter_raw_lines_at
from tracegen.problems.hub import HUB_DATASETS
from tracegen.problems.loader import shipped_sets
from tracegen.terminal import one_line

CARD = "README.md"
PREFIXES = {d.id_prefix: name for name, d in HUB_DATASETS.items() if d.id_prefix}
"""Problem id prefix → the hub dataset it comes from (`tracegen.problems.hub.HUB_DATASETS`)."""
SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


class ConvertOptions(Protocol):
    """What `convert` was asked to do (`tracegen.export.builder.ConvertOptions`)."""

    @property
    def fmt(self) -> str: ...
    @property
    def only_success(self) -> bool: ...
    @property
    def only_ideal(self) -> bool: ...
    @property
    def reasoning_field(self) -> bool: ...
    @property
    def keep_logprobs(self) -> bool: ...
    @property
    def tokenizer(self) -> Path | None: ...
    @property
    def max_length(self) -> int | None: ...


class ConvertCounts(Protocol):
    """What `convert` skipped (`tracegen.export.builder.ConvertCounts`)."""

    failed: int
    filtered: int
    incomplete: int
    kept_failures: Counter[str]
    no_model_token: int
    outside_model: Counter[str]
    skipped: Counter[str]


class _Line(msgspec.Struct):
    schema: str = ""
    problem_id: str = ""
    mode: str = ""
    model: str = ""
    hosts: list[str] = []
    settings_hash: str = ""
    created_at: str = ""
    success: bool = False
    is_ideal: bool = False
    logprobs_status: str = "not_requested"


_DECODER = msgspec.json.Decoder(_Line)


@dataclass
class Provenance:
    """What the source traces say about themselves."""

    traces: int = 0
    success: int = 0
    ideal: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    settings: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)
    logprobs: Counter[str] = field(default_factory=Counter)
    first: str = ""
    last: str = ""


def problem_source(problem_id: str, builtin: set[str]) -> str:
    """Where a problem id comes from, by the id conventions of the problem loaders."""
    for prefix, name in PREFIXES.items():
        if problem_id.startswith(prefix):
            return name
    return "builtin" if problem_id in builtin else "other (a problem file)"


def _builtin_ids() -> set[str]:
    path = shipped_sets().get("builtin")
    if path is None:
        return set()
    return {str(orjson.loads(raw).get("id")) for _, _, raw in iter_raw_lines_at(path)}


def read_provenance(source: Path) -> Provenance:
    """One pass over the traces, decoding only the fields the card states."""
    found = Provenance()
    builtin = _builtin_ids()
    for lineno, _, raw in iter_raw_lines_at(source):
        line = decode_trace(_DECODER, raw, source, lineno)
        found.traces += 1
        found.success += line.success
        found.ideal += line.is_ideal
        found.modes[line.mode] += 1
        found.models[line.model] += 1
        found.hosts.update(line.hosts)
        found.settings[line.settings_hash] += 1
        found.sources[problem_source(line.problem_id, builtin)] += 1
        found.logprobs[line.logprobs_status] += 1
        if line.created_at:
            found.first = min(found.first or line.created_at, line.created_at)
            found.last = max(found.last, line.created_at)
    return found


def read_settings(source: Path) -> dict[str, dict[str, Any]]:
    """The settings of each hash, from the header lines of the run's state file, if present."""
    state = source.with_name(source.name + ".state")
    found: dict[str, dict[str, Any]] = {}
    if not state.is_file():
        return found
    for _, _, raw in iter_raw_lines_at(state):
        if b'"settings"' not in raw:
            continue
        try:
            header = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(header, dict) and isinstance(header.get("settings"), dict):
            found[str(header.get("settings_hash"))] = header["settings"]
    return found


@dataclass
class DatasetRows:
    """What the written dataset holds, read back from its columns."""

    rows: int
    success: int | None
    ideal: int | None
    modes: Counter[str]


def read_rows(directory: Path) -> DatasetRows:
    """Its rows, and the successes, ideal rows and modes among them where it has those
    columns (a format of grouped samples has none)."""
    import datasets

    dataset = datasets.load_from_disk(str(directory))
    names = [n for n in ("mode", "success", "is_ideal") if n in dataset.column_names]
    columns = dataset.select_columns(names).to_dict()
    return DatasetRows(
        rows=len(dataset),
        success=sum(columns["success"]) if "success" in columns else None,
        ideal=sum(columns["is_ideal"]) if "is_ideal" in columns else None,
        modes=Counter(columns.get("mode", [])),
    )


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def _share(name: str, part: int | None, whole: int) -> str:
    return f"{name}: –" if part is None else f"{name}: {part:,} ({_rate(part, whole)})"


def _size(rows: int) -> str:
    return next((label for limit, label in SIZES if rows < limit), "n>1M")


def _code(value: object, limit: int = 500) -> str:
    """``value`` as Markdown inline code whatever it holds: on one line (control and
    bidirectional characters shown as escapes, so no newline can start a heading or an image),
    fenced by more backticks than it holds in a row."""
    text = one_line(str(value), limit)
    run = max(map(len, re.findall(r"`+", text)), default=0)
    pad = " " if run else ""
    fence = "`" * (run + 1)
    return f"{fence}{pad}{text}{pad}{fence}"


def _listing(counts: Counter[str]) -> str:
    return ", ".join(f"{_code(k)} ({v:,})" for k, v in counts.most_common()) or "–"


def metadata(rows: DatasetRows, source: Provenance, fmt: str) -> dict[str, Any]:
    return {
        "pretty_name": "tracegen reasoning traces",
        "task_categories": ["text-generation"],
        "language": ["en"],
        "size_categories": [_size(rows.rows)],
        "tags": ["code", "reasoning", "synthetic", "tracegen", *sorted(source.modes), fmt],
    }


def _filters(options: ConvertOptions, counts: ConvertCounts) -> list[str]:
    lines = [f"- failed episodes (records with an `error`) skipped: {counts.failed:,}"]
    if counts.kept_failures:
        kept = _listing(counts.kept_failures)
        lines[0] = f"- failed episodes kept, with their reward and error: {kept}"
    if counts.no_model_token:
        lines.append(f"- failed without a model token, skipped: {counts.no_model_token:,}")
    if counts.outside_model:
        lines.append(
            "- episodes failed by the server or tracegen skipped: " + _listing(counts.outside_model)
        )
    if options.only_success or options.only_ideal:
        flag = "--only-ideal" if options.only_ideal else "--only-success"
        lines.append(f"- `{flag}`: {counts.filtered:,} traces left out")
    if counts.incomplete:
        lines.append(f"- without an assistant turn: {counts.incomplete:,} skipped")
    if options.reasoning_field:
        lines.append("- thinking kept in `reasoning_content` (`--reasoning-field`)")
    if options.keep_logprobs:
        lines.append("- token logprobs kept (`--keep-logprobs`)")
    if options.tokenizer is not None:
        lines.append(f"- traces without token ids tokenized with {_code(options.tokenizer)}")
    if options.max_length is not None:
        lines.append(f"- records cut to {options.max_length:,} tokens (`--max-length`)")
    lines += [f"- {reason}: {n:,} skipped" for reason, n in counts.skipped.items()]
    return lines


def _n(value: object) -> str:
    """A count read from a curation record: a number, or whatever it is as inline code."""
    return f"{value:,}" if isinstance(value, int) else _code(value)


def _step_line(step: dict[str, Any]) -> str:
    name = step.get("step")
    if name == "dedup":
        command = f"tracegen dedup --by {step.get('by')} --threshold {step.get('threshold')}"
        return one_line(
            f"- {_code(command)} on {_code(step.get('input'))}: kept {_n(step.get('kept'))} of "
            f"{_n(step.get('traces'))} traces, removed {_n(step.get('removed_exact'))} exact and "
            f"{_n(step.get('removed_near'))} near duplicates in {_n(step.get('clusters'))} "
            "clusters",
            5_000,
        )
    if name == "decontaminate":
        against = ", ".join(
            f"{_code(k)} ({_n(v)} problems)" for k, v in (step.get("against") or {}).items()
        )
        dropped = ", ".join(f"{_code(k)}: {_n(v)}" for k, v in (step.get("dropped") or {}).items())
        command = f"tracegen decontaminate --ngram {step.get('ngram')}"
        return one_line(
            f"- {_code(command)} on {_code(step.get('input'))} against {against}: kept "
            f"{_n(step.get('kept'))} of {_n(step.get('traces'))} traces, dropped "
            f"{dropped or 'none'}",
            5_000,
        )
    return f"- {_code(name)}: {_code(orjson.dumps(step).decode(), 5_000)}"


def render_card(
    source_path: Path,
    rows: DatasetRows,
    source: Provenance,
    settings: dict[str, dict[str, Any]],
    steps: list[dict[str, Any]],
    options: ConvertOptions,
    counts: ConvertCounts,
    fields: str,
) -> str:
    """The card's text: YAML metadata, then the provenance in Markdown; ``fields`` says
    what a row of the format holds."""
    meta = yaml.safe_dump(metadata(rows, source, options.fmt), sort_keys=False)
    hashes = []
    for digest, n in source.settings.most_common():
        shown = settings.get(digest)
        detail = f": {_code(orjson.dumps(shown).decode(), 20_000)}" if shown else ""
        hashes.append(f"- {_code(digest or '(none)')} ({n:,} traces){detail}")
    curation = [_step_line(s) for s in steps] or ["- none recorded"]
    period = f"{source.first} to {source.last}" if source.first else "–"
    parts = [
        "---",
        "# Fill in the license of this dataset (an identifier such as mit or apache-2.0).",
        "license:",
        meta.rstrip(),
        "---",
        "",
        "# tracegen reasoning traces",
        "",
        "Reasoning traces in which a model wrote code, had it executed in a sandbox and",
        "read the results; each was scored by the problem's tests. Made with",
        "[tracegen](https://pypi.org/project/tracegen/).",
        "",
        "## Contents",
        "",
        f"- rows: {rows.rows:,} (format `{options.fmt}`)",
        f"- {_share('success', rows.success, rows.rows)}, {_share('ideal', rows.ideal, rows.rows)}",
        f"- modes: {_listing(rows.modes)}",
        "",
        "## Provenance",
        "",
        f"- converted with tracegen {__version__} from {_code(source_path)} "
        f"({source.traces:,} traces, {source.success:,} successful "
        f"({_rate(source.success, source.traces)}), {source.ideal:,} ideal "
        f"({_rate(source.ideal, source.traces)}))",
        f"- model(s): {_listing(source.models)}",
        f"- backend hosts: {_listing(source.hosts)}",
        f"- modes: {_listing(source.modes)}",
        f"- problem sources: {_listing(source.sources)}",
        f"- logprobs: {_listing(source.logprobs)}",
        f"- generated: {period}",
        "- settings hashes:",
        *(f"  {h}" for h in hashes),
        "",
        "## Filters applied by `tracegen convert`",
        "",
        *_filters(options, counts),
        "",
        "## Curation (deduplication, decontamination)",
        "",
        *curation,
        "",
        "## Fields",
        "",
        fields,
        "",
    ]
    return "\n".join(parts)


def write_card(
    directory: Path,
    source_path: Path,
    options: ConvertOptions,
    counts: ConvertCounts,
    *,
    fields: str,
) -> Path:
    """Write ``README.md`` into the dataset ``directory``; return its path."""
    text = render_card(
        source_path,
        read_rows(directory),
        read_provenance(source_path),
        read_settings(source_path),
        read_steps(source_path),
        options,
        counts,
        fields,
    )
    path = directory / CARD
    path.write_text(text, encoding="utf-8")
    return path
