"""`tracegen convert --rl trl|atropos` and `--tokenized`: traces as token ids for training.

One registry of token formats; each builds a record from a sequence (`tracegen.export.tokens`),
checks it before it is written (lengths agree, masked positions carry the framework's
fillers, the model-sampled ids decode to the model's text), and may finish it (truncation)
or gather records (Atropos' groups). Outputs stream like every other format's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tracegen.errors import ConfigError, InputFileError
from tracegen.export.convert import (
    _check_target,
    default_output,
    write_hf,
    write_jsonl,
    write_parquet,
)
from tracegen.export.formats import is_convertible
from tracegen.export.rl import (
    atropos_features,
    atropos_groups,
    atropos_sample,
    check_atropos,
    check_trl,
    trl_features,
    trl_row,
)
from tracegen.export.tokenized import check_tokenized, tokenized_features, tokenized_row, truncate
from tracegen.export.tokenizers import Tokenizer, load_tokenizer
from tracegen.export.tokens import Decoder, Skipped, TokenEpisode, TokenSequence, token_episode
from tracegen.jsonl import iter_lines, iter_records
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

Row = dict[str, Any]
RL_FRAMEWORKS = ("trl", "atropos")


@dataclass(frozen=True)
class TokenOptions:
    """What a token conversion keeps and how."""

    fmt: str
    tokenizer: Path | None = None
    require_exact: bool = False
    max_length: int | None = None
    only_success: bool = False
    only_ideal: bool = False


def _as_is(row: Row, options: TokenOptions) -> Row:
    return row


def _truncated(row: Row, options: TokenOptions) -> Row:
    return truncate(row, options.max_length)


@dataclass(frozen=True)
class TokenFormat:
    """A training layout of token ids: one record per sequence, checked, then finished;
    ``group`` gathers records (Atropos: per problem)."""

    row: Callable[[Trace, TokenEpisode, TokenSequence], Row]
    check: Callable[[Row, list[str], Decoder], str | None]
    features: Callable[[], Features]
    finish: Callable[[Row, TokenOptions], Row] = _as_is
    group: Callable[[Iterator[Row]], Iterator[Row]] | None = None


TOKEN_FORMATS: dict[str, TokenFormat] = {
    "rl-trl": TokenFormat(trl_row, check_trl, trl_features),
    "rl-atropos": TokenFormat(
        atropos_sample, check_atropos, atropos_features, group=atropos_groups
    ),
    "tokenized": TokenFormat(tokenized_row, check_tokenized, tokenized_features, _truncated),
}

_REASONS = {
    "not exact": "without exact ids (--require-exact)",
    "layout": "whose ids do not fit their messages",
    "self-check": "records failing the self-check",
    "truncated away": "records without a model token within --max-length",
}


@dataclass
class TokenCounts:
    traces: int = 0
    exact: int = 0
    retokenized: int = 0
    split: int = 0
    records: int = 0
    groups: int = 0
    truncated: int = 0
    failed: int = 0
    filtered: int = 0
    incomplete: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    first_skip: str = ""
    outputs: list[str] = field(default_factory=list)

    def skip(self, trace: Trace, why: Skipped) -> None:
        self.skipped[why.reason] += 1
        if not self.first_skip and why.detail:
            self.first_skip = f"first: {trace.id}: {why.detail}"

    def summary(self, options: TokenOptions) -> str:
        made = f"{self.records} records"
        if self.groups:
            made += f" in {self.groups} groups"
        text = (
            f"converted {self.traces} traces ({options.fmt}) to {made} → "
            f"{', '.join(self.outputs)}: {self.exact} exact, {self.retokenized} retokenized"
        )
        text += f"; {self.traces - self.split} as one sequence, {self.split} turn by turn"
        if self.truncated:
            text += f", {self.truncated} records truncated to --max-length {options.max_length}"
        skipped = []
        if self.failed:
            skipped.append(f"{self.failed} failed episodes")
        if self.filtered:
            flag = "--only-ideal" if options.only_ideal else "--only-success"
            skipped.append(f"{self.filtered} filtered by {flag}")
        if self.incomplete:
            skipped.append(f"{self.incomplete} without an assistant turn")
        skipped += [f"{n} {_REASONS[reason]}" for reason, n in self.skipped.items()]
        if skipped:
            text += f"; skipped {', '.join(skipped)}"
            text += f" ({self.first_skip})" if self.first_skip else ""
        return text


def _kept(path: Path, options: TokenOptions, counts: TokenCounts) -> Iterator[tuple[int, Trace]]:
    for lineno, trace in iter_records(path, Trace):
        if trace.error is not None:
            counts.failed += 1
        elif (options.only_success and not trace.success) or (
            options.only_ideal and not trace.is_ideal
        ):
            counts.filtered += 1
        elif not is_convertible(trace):
            counts.incomplete += 1
        else:
            yield lineno, trace


def _records(
    path: Path, options: TokenOptions, tokenizer: Tokenizer | None, counts: TokenCounts
) -> Iterator[Row]:
    fmt = TOKEN_FORMATS[options.fmt]
    for lineno, trace in _kept(path, options, counts):
        try:
            episode = token_episode(trace, tokenizer, require_exact=options.require_exact)
        except Skipped as why:
            counts.skip(trace, why)
            continue
        except ConfigError as e:
            raise ConfigError(f"{path}:{lineno}: {e}") from None
        counts.traces += 1
        counts.exact += episode.source == "exact"
        counts.retokenized += episode.source == "retokenized"
        counts.split += episode.split
        for sequence in episode.sequences:
            row = fmt.row(trace, episode, sequence)
            problem = fmt.check(row, sequence.texts, episode.decode)
            try:
                if problem is not None:
                    raise Skipped("self-check", problem)
                row = fmt.finish(row, options)
            except Skipped as why:
                counts.skip(trace, why)
                continue
            counts.records += 1
            counts.truncated += bool(row.get("truncated"))
            yield row


def iter_token_rows(
    path: Path, options: TokenOptions, counts: TokenCounts | None = None
) -> Iterator[Row]:
    """The records of the traces in ``path`` in format ``options.fmt``, one at a time."""
    counts = counts if counts is not None else TokenCounts()
    group = TOKEN_FORMATS[options.fmt].group
    tokenizer = load_tokenizer(options.tokenizer) if options.tokenizer is not None else None
    try:
        rows = _records(path, options, tokenizer, counts)
        if group is None:
            yield from rows
            return
        for row in group(rows):
            counts.groups += 1
            yield row
    finally:
        if tokenizer is not None:
            tokenizer.close()


def _hf_rows(path: str, options: TokenOptions) -> Iterator[Row]:
    yield from iter_token_rows(Path(path), options)


def token_format(rl: str | None, tokenized: bool, flags: dict[str, bool]) -> str:
    """The token format the flags ask for (``rl-trl``, ``rl-atropos``, ``tokenized``);
    ``flags`` are the other formats' flags and options, by name, and whether each was given."""
    given = [name for name, on in flags.items() if on]
    formats = [n for n in given if n in ("--chat-format", "--sharegpt", "--training-format")]
    if formats or (rl is not None and tokenized):
        raise ConfigError(
            "choose exactly one of --chat-format, --sharegpt, --training-format, --rl, --tokenized"
        )
    if given:
        raise ConfigError(f"{given[0]} applies to --chat-format, --sharegpt, --training-format")
    if rl is not None and rl not in RL_FRAMEWORKS:
        raise ConfigError(f"--rl {rl}: expected one of {', '.join(RL_FRAMEWORKS)}")
    return f"rl-{rl}" if rl else "tokenized"


def token_convert_command(
    *,
    input: Path,
    fmt: str,
    output: Path | None = None,
    to_hf: Path | None = None,
    parquet: Path | None = None,
    tokenizer: Path | None = None,
    require_exact: bool = False,
    max_length: int | None = None,
    only_success: bool = False,
    only_ideal: bool = False,
) -> TokenCounts:
    """Convert ``input`` to every requested output; print a one-line summary on stderr."""
    if max_length is not None and fmt != "tokenized":
        raise ConfigError("--max-length applies to --tokenized only")
    if max_length is not None and max_length < 1:
        raise ConfigError(f"--max-length {max_length}: must be at least 1")
    if not input.is_file():
        raise InputFileError(f"{input}: no such file")
    if next(iter_lines(input), None) is None:
        raise InputFileError(f"{input}: holds no traces")
    options = TokenOptions(fmt, tokenizer, require_exact, max_length, only_success, only_ideal)
    if output is None and to_hf is None and parquet is None:
        output = default_output(input, fmt)
    targets = [p for p in (output, parquet, to_hf) if p is not None]
    if any(p.resolve() == input.resolve() for p in targets):
        raise ConfigError(f"{input}: output would overwrite the input")
    for target in targets:
        _check_target(target, dataset=target is to_hf)
    counts = TokenCounts()
    features = TOKEN_FORMATS[fmt].features
    if output is not None:
        write_jsonl(iter_token_rows(input, options, counts), output)
    if parquet is not None:
        rows = iter_token_rows(input, options, None if output else counts)
        write_parquet(rows, parquet, features())
    if to_hf is not None:
        write_hf(_hf_rows, {"path": str(input), "options": options}, to_hf, features())
        if output is None and parquet is None:
            for _ in iter_token_rows(input, options, counts):
                pass
    counts.outputs = [str(p) for p in targets]
    Console(stderr=True, highlight=False).print(
        counts.summary(options), markup=False, soft_wrap=True
    )
    return counts
