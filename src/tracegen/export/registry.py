"""The output formats of `tracegen convert`, by name.

A format is its name (``IN.<name>.jsonl``), the flag that asks for it (and its help), the
`Builder` that makes its records, their `datasets` features, the options it takes, and what
the dataset card says of its records. Every output (JSONL, Parquet, ``--to-hf``) carries every
format. `tracegen convert`'s format flags are made from these entries (`flags`). Each entry
loads what makes its records when it is used: the token formats bring numpy, which a text
format has no use for; reading the entries imports neither, so ``convert --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tracegen.errors import ConfigError

if TYPE_CHECKING:
    from datasets import Features

    from tracegen.export.builder import Builder, ConvertCounts, ConvertOptions


class _Maker(Protocol):
    """A `TextFormat` or a `TokenFormat`."""

    def builder(self, options: ConvertOptions, counts: ConvertCounts) -> Builder: ...

    def features(self, options: ConvertOptions) -> Features: ...


@dataclass(frozen=True)
class Format:
    name: str
    flag: str
    """How it is asked for: ``--chat-format``, ``--rl trl``."""
    help: str
    """What ``--help`` says of it: of the flag, or of the value (``trl``) of a flag that
    takes one."""
    load: Callable[[], _Maker]
    """What makes its records, imported when called."""
    takes: frozenset[str]
    """The options of `ConvertOptions` shaping records that it takes, by flag."""
    fields: str
    """The dataset card's account of a record."""
    panel: str | None = None
    """The ``--help`` panel of its flag (None: Options)."""

    def builder(self, options: ConvertOptions, counts: ConvertCounts) -> Builder:
        return self.load().builder(options, counts)

    def features(self, options: ConvertOptions) -> Features:
        return self.load().features(options)


def _chat() -> _Maker:
    from tracegen.export.formats import CHAT

    return CHAT


def _sharegpt() -> _Maker:
    from tracegen.export.formats import SHAREGPT

    return SHAREGPT


def _training() -> _Maker:
    from tracegen.export.formats import TRAINING

    return TRAINING


def _trl() -> _Maker:
    from tracegen.export.tokens.formats import TRL

    return TRL


def _atropos() -> _Maker:
    from tracegen.export.tokens.formats import ATROPOS

    return ATROPOS


def _tokenized() -> _Maker:
    from tracegen.export.tokens.formats import TOKENIZED

    return TOKENIZED


TEXT_FIELDS = (
    "Every row keeps `id`, `problem_id`, `sample`, `mode`, `model`, `score`, `success`, "
    "`is_ideal` and `reward`. Blocks written by tracegen rather than the model "
    "(`<result>`, `<error>`, `<tool_response>`) are inside assistant text in some formats: "
    "mask them from the loss when training."
)
TOKENS = "Token ids (RL, tokenized SFT)"
"""The help panel of the formats made of token ids and of the options they take."""
TOKEN_OPTIONS = frozenset({"--tokenizer", "--require-exact"})
TOKEN_FIELDS = (
    " `token_source` says where the ids came from: `exact` (as the backend returned them) or "
    "`retokenized` (the text tokenized with `--tokenizer`); an episode whose prompts do not "
    "extend each other is one row per model request, numbered by `turn`."
)

FAILED_FIELDS = (
    " Failed episodes the model wrote are rows too, with their `reward` and `error_kind`/"
    "`error_reason` (null for the others), unless `--only-success`. Program problems' "
    "rows carry the verdict's `outcome` and each test's in `test_outcomes`."
)

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "chat",
            "--chat-format",
            "OpenAI chat `messages` (TRL SFTTrainer).",
            _chat,
            frozenset({"--reasoning-field", "--keep-logprobs"}),
            TEXT_FIELDS,
        ),
        Format(
            "sharegpt",
            "--sharegpt",
            "ShareGPT `conversations` (from/value).",
            _sharegpt,
            frozenset({"--keep-logprobs"}),
            TEXT_FIELDS,
        ),
        Format(
            "training",
            "--training-format",
            "Problem + one assistant message.",
            _training,
            frozenset({"--keep-logprobs"}),
            TEXT_FIELDS,
        ),
        Format(
            "rl-trl",
            "--rl trl",
            "GRPOTrainer rollout_func",
            _trl,
            TOKEN_OPTIONS,
            "Each row is an episode as a TRL `GRPOTrainer` `rollout_func` returns it: "
            "`prompt_ids`, `completion_ids` (the model's tokens and, between them, what "
            "tracegen fed back), `logprobs` (`0.0` on tracegen's tokens), `env_mask` (0 on "
            "tracegen's tokens), `logprobs_kind` (`processed`, `raw at T=…` or `unknown`), "
            "with `reward`, `score`, `success`, `error_kind`, `error_reason`, `id`, "
            "`problem_id`, `sample`, `mode` and `model`." + TOKEN_FIELDS + FAILED_FIELDS,
            panel=TOKENS,
        ),
        Format(
            "rl-atropos",
            "--rl atropos",
            "ScoredDataGroup per problem",
            _atropos,
            TOKEN_OPTIONS | {"--min-group-size", "--drop-equal-scores"},
            "Each row is the group of one problem's samples in the shape of Atropos' "
            "`ScoredDataGroup`: `tokens`, `masks` (`-100` on the prompt and on tracegen's "
            "tokens), `inference_logprobs` (`1.0` where masked), `scores`, `messages`, with "
            "`ids`, `turns`, `token_sources`, `successes`, `errors` and `logprobs_kinds` per "
            "sample." + TOKEN_FIELDS + FAILED_FIELDS,
            panel=TOKENS,
        ),
        Format(
            "tokenized",
            "--tokenized",
            "input_ids + assistant_masks for SFTTrainer (model tokens only).",
            _tokenized,
            TOKEN_OPTIONS | {"--max-length"},
            "Each row is pre-tokenized for TRL's `SFTTrainer`: `input_ids`, `attention_mask` "
            "and `assistant_masks` (1 only on the model's tokens, not on the prompt nor on "
            "what tracegen wrote), `truncated` when cut to `--max-length`, with `reward`, "
            "`score`, `success`, `error_kind`, `error_reason`, `id`, `problem_id`, `sample`, "
            "`mode` and `model`." + TOKEN_FIELDS + FAILED_FIELDS,
            panel=TOKENS,
        ),
    )
}


VALUED: dict[str, str] = {"--rl": "RL rollouts as token ids"}
"""The flags that take a value naming one format (``--rl trl``), and what they ask for."""


def flags() -> dict[str, list[Format]]:
    """Each flag of `FORMATS` (``--rl`` once, with the formats its values name), in order."""
    out: dict[str, list[Format]] = {}
    for f in FORMATS.values():
        out.setdefault(f.flag.split()[0], []).append(f)
    return out


def flag_help(flag: str) -> str:
    """What ``--help`` says of ``flag``: its format's help, or (a flag taking a value) what it
    asks for and each value it takes, from the entries."""
    formats = flags()[flag]
    if flag not in VALUED:
        return formats[0].help
    values = [f"{f.flag.partition(' ')[2]} ({f.help})" for f in formats]
    return f"{VALUED[flag]}: {' or '.join(values)}."


def _flags(formats: list[Format]) -> str:
    """The flags of ``formats``, each once: ``--rl`` for all of ``--rl trl|atropos``."""
    return ", ".join(dict.fromkeys(f.flag.split()[0] for f in formats))


def choose_format(asked: list[str]) -> Format:
    """The one format ``asked`` names by flag (``["--rl", "trl"]`` as ``"--rl trl"``)."""
    if len(asked) != 1:
        raise ConfigError(f"choose exactly one of {_flags(list(FORMATS.values()))}")
    found = next((f for f in FORMATS.values() if f.flag == asked[0]), None)
    if found is None:
        flag, _, value = asked[0].partition(" ")
        values = [f.flag.partition(" ")[2] for f in FORMATS.values() if f.flag.startswith(flag)]
        raise ConfigError(f"{flag} {value}: expected one of {', '.join(values)}")
    return found


def check_options(fmt: Format, given: dict[str, bool]) -> None:
    """Refuse an option given (``given[flag]``) that ``fmt`` does not take."""
    for option, on in given.items():
        if on and option not in fmt.takes:
            taking = [f for f in FORMATS.values() if option in f.takes]
            raise ConfigError(f"{option} applies to {_flags(taking)} only")
