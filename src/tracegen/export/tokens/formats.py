"""The token formats: traces as token ids for training (`--rl trl|atropos`, `--tokenized`).

Each is a `TokenFormat`: a record per sequence of an episode (`tracegen.export.tokens.sequences`),
checked before it is written (lengths agree, masked positions carry the framework's fillers,
the model-sampled ids decode to the model's text), then finished (truncation) and possibly
gathered (Atropos' groups). A record that fails its check is skipped and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracegen.export.builder import BATCH_ROWS, ConvertCounts, ConvertOptions, Row, Skipped
from tracegen.export.rl import (
    CONSTRAINED,
    atropos_features,
    atropos_groups,
    atropos_sample,
    check_atropos,
    check_trl,
    logprobs_kind,
    sampled_logprobs,
    trl_features,
    trl_row,
)
from tracegen.export.tokens.sequences import Decoder, TokenEpisode, TokenSequence, token_episode
from tracegen.export.tokens.sft import check_tokenized, tokenized_features, tokenized_row, truncate
from tracegen.export.tokens.tempering import tempered_requests
from tracegen.export.tokens.tokenizer import load_tokenizer
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

SELF_CHECK = "records failing the self-check"


def _as_is(row: Row, options: ConvertOptions) -> Row:
    return row


@dataclass(frozen=True)
class TokenFormat:
    """A training layout of token ids: a record per sequence (``row``), its ``check`` (why
    it is not what the framework reads, or None), ``finish`` (may raise `Skipped`), and
    ``group``, which gathers the records (Atropos: per problem)."""

    row: Callable[[Trace, TokenEpisode, TokenSequence], Row]
    check: Callable[[Row, list[str], Decoder], str | None]
    columns: Callable[[], Features]
    finish: Callable[[Row, ConvertOptions], Row] = _as_is
    group: Callable[[Iterator[Row]], Iterator[Row]] | None = None
    logprobs: bool = True
    """Whether its records carry the sampled tokens' logprobs (the summary says which)."""

    def features(self, options: ConvertOptions) -> Features:
        return self.columns()

    def builder(self, options: ConvertOptions, counts: ConvertCounts) -> TokenBuilder:
        return TokenBuilder(self, options, counts)


class TokenBuilder:
    """The `Builder` of a token format: opens ``--tokenizer`` once, and counts where the ids
    came from, how episodes were exported, what was truncated and what was made."""

    reads_logprobs = True
    keeps_failures = True

    def __init__(self, fmt: TokenFormat, options: ConvertOptions, counts: ConvertCounts) -> None:
        self._fmt = fmt
        self._options = options
        self._counts = counts
        self._tokenizer = load_tokenizer(options.tokenizer) if options.tokenizer else None
        # A group (every sample of a problem) is written alone: a batch of groups would
        # hold a share of the file that grows with it.
        self.batch_rows = 1 if fmt.group is not None else BATCH_ROWS
        self.exact = self.retokenized = self.split = 0
        self.records = self.truncated = self.groups = 0
        self.singles = self.equal = self.dropped = 0
        self.kinds: Counter[str] = Counter()

    def rows(self, trace: Trace) -> Iterable[Row]:
        kind = logprobs_kind(trace)
        if self._fmt.logprobs and not sampled_logprobs(kind) and trace.token_requests:
            trace, kind = _tempered(trace, kind)
        episode = token_episode(trace, self._tokenizer, require_exact=self._options.require_exact)
        if self._fmt.logprobs and episode.source == "exact":
            self.kinds[kind] += 1
        self.exact += episode.source == "exact"
        self.retokenized += episode.source == "retokenized"
        self.split += episode.split
        return self._records(trace, episode, kind)

    def _records(self, trace: Trace, episode: TokenEpisode, kind: str) -> Iterator[Row]:
        for sequence in episode.sequences:
            row = self._fmt.row(trace, episode, sequence)
            if "logprobs_kind" in row:
                row["logprobs_kind"] = kind
            try:
                problem = self._fmt.check(row, sequence.texts, episode.decode)
                if problem is not None:
                    raise Skipped(SELF_CHECK, problem)
                row = self._fmt.finish(row, self._options)
            except Skipped as why:
                self._counts.skip(trace, why)
                continue
            self.records += 1
            self.truncated += bool(row.get("truncated"))
            yield row

    def gather(self, rows: Iterator[Row]) -> Iterator[Row]:
        if self._fmt.group is None:
            yield from rows
            self._warn_logprobs()
            return
        least = self._options.min_group_size or 0
        for group in self._fmt.group(rows):
            size, equal = len(group["scores"]), len(set(group["scores"])) == 1
            self.singles += size == 1
            self.equal += equal and size > 1
            if size < least or (equal and self._options.drop_equal_scores):
                self.dropped += 1
                self.records -= size
                continue
            self.groups += 1
            yield group
        self._warn_groups()
        self._warn_logprobs()

    def _warn_groups(self) -> None:
        """One line on the groups Atropos skips (``atroposlib`` 0.4.0, ``envs/base.py``
        ``handle_send_to_api``: a group whose size is not ``group_size``, or whose scores
        are all the same while ``ensure_scores_are_not_same``, the default)."""
        if not (self.singles or self.equal):
            return
        found = []
        if self.singles:
            found.append(f"{self.singles} of one sample")
        if self.equal:
            found.append(f"{self.equal} more with all-equal scores")
        what = "dropped" if self.dropped else "kept"
        self._counts.warnings.append(
            f"{' and '.join(found)} among {self.groups + self.dropped} groups ({what}): "
            "Atropos learns nothing from a group whose scores are all equal and skips it "
            "(ensure_scores_are_not_same); --min-group-size N and --drop-equal-scores drop "
            "such groups here"
        )

    def summary(self) -> str:
        made = f"{self.records} records"
        if self._fmt.group is not None:
            made = f"{self.groups} groups of {made}"
        episodes = self.exact + self.retokenized
        text = f"{made}; {self.exact} exact, {self.retokenized} retokenized"
        text += f"; {episodes - self.split} as one sequence, {self.split} turn by turn"
        if self.dropped:
            text += f"; dropped {self.dropped} groups (--min-group-size, --drop-equal-scores)"
        if self.truncated:
            limit = self._options.max_length
            text += f", {self.truncated} records truncated to --max-length {limit}"
        if self.kinds:
            text += "; logprobs " + ", ".join(f"{k} {n}" for k, n in self.kinds.most_common())
        return text

    def _warn_logprobs(self) -> None:
        """One line when some episodes' logprobs are not the sampler's."""
        constrained = sum(n for k, n in self.kinds.items() if k.endswith(CONSTRAINED))
        if constrained:
            self._counts.warnings.append(
                f"{constrained} episodes were decoded under a grammar (--constrain): the "
                "grammar masked the sampler, so their logprobs (the model's before the mask) "
                "are not the distribution sampled from; for on-policy logprobs generate with "
                "--constrain off"
            )
        off = {
            k: n
            for k, n in self.kinds.items()
            if not sampled_logprobs(k) and not k.endswith(CONSTRAINED)
        }
        if not off:
            return
        self._counts.warnings.append(
            f"{sum(off.values())} episodes carry logprobs that are not the sampling "
            f"distribution's ({', '.join(f'{k} {n}' for k, n in off.items())}): TRL's "
            "importance-sampling correction compares log-softmax(logits / T); generate with "
            "--logprobs processed (llama.cpp, the local backend) or at --temperature 1, or "
            "train with GRPOConfig(vllm_importance_sampling_correction=False)"
        )

    def close(self) -> None:
        if self._tokenizer is not None:
            self._tokenizer.close()


def _tempered(trace: Trace, kind: str) -> tuple[Trace, str]:
    """``trace`` with its raw logprobs tempered where `tempered_requests` can (its kind then
    ``tempered from raw at T=…``), else as it is."""
    temperature = trace.sampling.temperature if trace.sampling else None
    if trace.logprobs_kind != "raw" or temperature is None:
        return trace, kind
    requests = tempered_requests(trace, temperature)
    if requests is None:
        return trace, kind
    return trace.model_copy(update={"token_requests": requests}), f"tempered from {kind}"


TRL = TokenFormat(trl_row, check_trl, trl_features)
ATROPOS = TokenFormat(atropos_sample, check_atropos, atropos_features, group=atropos_groups)
TOKENIZED = TokenFormat(
    tokenized_row, check_tokenized, tokenized_features, truncate, logprobs=False
)
