"""Pre-tokenized SFT records with the model's tokens marked for the loss.

The layout TRL's ``SFTTrainer`` takes as it is (``trl`` 1.16.0,
``trl/trainer/sft_trainer.py``: a dataset with ``input_ids`` is not tokenized again, and an
``assistant_masks`` column always becomes the labels' mask): ``input_ids``,
``attention_mask`` (all 1) and ``assistant_masks``, 1 only on tokens the model wrote — not
the prompt, not tool or user messages, not the ``<tool_response>``/``<result>``/``<error>``
blocks tracegen wrote into an inline-tools assistant message. A record longer than
``--max-length`` is cut to its first ``max_length`` tokens and says so (``truncated``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracegen.export.builder import ConvertOptions, Row, Skipped, trace_columns
from tracegen.export.rl import EPISODE_FIELDS, episode_fields
from tracegen.export.tokens.sequences import Decoder, TokenEpisode, TokenSequence, check_text
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

TRUNCATED_AWAY = "records without a model token within --max-length"


def tokenized_row(trace: Trace, episode: TokenEpisode, sequence: TokenSequence) -> Row:
    ids = sequence.prompt_ids + sequence.completion_ids
    row = episode_fields(trace)
    row |= {
        "turn": sequence.turn,
        "token_source": episode.source,
        "truncated": False,
        "input_ids": ids,
        "attention_mask": [1] * len(ids),
        "assistant_masks": [0] * len(sequence.prompt_ids) + sequence.env_mask,
    }
    return row


def check_tokenized(row: Row, texts: list[str], decode: Decoder) -> str | None:
    """Why ``row`` is not a record SFTTrainer trains on as meant, or None."""
    ids = row["input_ids"]
    attention, mask = np.asarray(row["attention_mask"]), np.asarray(row["assistant_masks"])
    if not len(ids) == len(attention) == len(mask):
        return "input_ids, attention_mask and assistant_masks differ in length"
    if not (attention == 1).all() or not np.isin(mask, (0, 1)).all():
        return "a mask holds a value other than 0 and 1"
    return check_text(ids, mask == 1, texts, decode)


def truncate(row: Row, options: ConvertOptions) -> Row:
    """``row`` cut to its first ``--max-length`` tokens (after its check), marked
    ``truncated``; `Skipped` when no model token is left."""
    max_length = options.max_length
    if max_length is None or len(row["input_ids"]) <= max_length:
        return row
    if not any(row["assistant_masks"][:max_length]):
        raise Skipped(TRUNCATED_AWAY, f"no model token within --max-length {max_length}")
    for name in ("input_ids", "attention_mask", "assistant_masks"):
        row[name] = row[name][:max_length]
    row["truncated"] = True
    return row


def tokenized_features() -> Features:
    from datasets import Features, List, Value

    return Features(
        {
            **trace_columns(EPISODE_FIELDS),
            "turn": Value("int64"),
            "token_source": Value("string"),
            "truncated": Value("bool"),
            "input_ids": List(Value("int32")),
            "attention_mask": List(Value("int8")),
            "assistant_masks": List(Value("int8")),
        }
    )
