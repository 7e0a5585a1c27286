"""RL rollouts in the shapes two frameworks read: TRL's GRPO and Atropos' scored groups.

**TRL** (``trl`` 1.16.0, ``trl/trainer/grpo_trainer.py``): a ``rollout_func`` given to
``GRPOTrainer`` returns ``prompt_ids``, ``completion_ids`` and ``logprobs`` (required keys in
``GRPOTrainer._generate``); an extra ``env_mask`` becomes the trainer's ``tool_mask`` (1 on
model tokens, 0 on tokens the environment wrote; the loss mask is ``completion_mask *
tool_mask``), and every other key is forwarded to the reward functions. TRL's own tool loop
(``_tool_call_loop``) appends a tool's tokens to ``completion_ids`` with mask 0 and logprob
``0.0``; so does this format. One record per episode (per request when it is split):
``prompt_ids``, ``completion_ids``, ``logprobs`` (None when the backend did not return one
for every sampled token), ``env_mask``, and ``reward``, ``score``, ``success``, ``id``,
``problem_id``, ``sample``, ``mode``, ``model``, ``turn``, ``token_source``.

**Atropos** (``atroposlib`` 0.4.0, ``atroposlib/envs/base.py`` ``ScoredDataGroup``;
``atroposlib/envs/server_handling/managed_server.py`` for the fillers): one record per
problem, its samples being the group GRPO-style trainers normalise over: ``tokens`` (prompt
and completion of each sample), ``masks`` (``-100`` where not trained: the prompt and what
tracegen wrote; the token id elsewhere), ``inference_logprobs`` (``1.0`` on masked positions,
and on a sampled token without a logprob, as ``ManagedServer`` pads), ``scores`` (each
trace's ``reward``), ``messages``; plus ``problem_id``, ``ids``, ``turns``, ``token_sources``.
An episode exported turn by turn gives one sample per turn, each with the episode's score.
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import orjson

from tracegen.export.builder import Row, trace_columns
from tracegen.export.tokens.sequences import Decoder, TokenEpisode, TokenSequence, check_text
from tracegen.schema import Trace

if TYPE_CHECKING:
    from datasets import Features

MASKED = -100
MASKED_LOGPROB = 1.0
TRACE_FIELDS = ("id", "problem_id", "sample", "mode", "model", "reward", "score", "success")
EPISODE_FIELDS = (*TRACE_FIELDS, "error_kind", "error_reason", "outcome", "test_outcomes")
"""What every token record says of its episode: the trace's fields, why it failed
(``error_kind``, ``error_reason``: null for an episode that ended without an error) and, for
a program problem, its verdict's ``outcome`` and each test's (``test_outcomes``; null and
empty for other problems)."""


def episode_fields(trace: Trace) -> Row:
    """The `EPISODE_FIELDS` of ``trace``."""
    row: Row = {name: getattr(trace, name) for name in TRACE_FIELDS}
    error = trace.error
    row["error_kind"] = error.kind if error is not None else None
    row["error_reason"] = error.reason if error is not None else None
    verdict = trace.verdict
    row["outcome"] = verdict.outcome if verdict is not None else None
    row["test_outcomes"] = [
        t.outcome for t in (verdict.tests if verdict is not None else ()) if t.outcome is not None
    ]
    return row


CONSTRAINED = " under a grammar"
"""Said after the kind of an episode decoded under a grammar (``--constrain``): the grammar
masks the sampler, and the recorded logprobs are the distribution before that mask, so they
are not what was sampled from (whatever their kind)."""


def logprobs_kind(trace: Trace) -> str:
    """What a trace's logprobs are, as a trainer needs to know: ``processed`` (the
    sampler's), ``raw at T=…`` (the model's, sampled at that temperature; ``raw at T=?`` when
    not recorded) or ``unknown``, followed by `CONSTRAINED` when decoding was constrained.
    The token formats may convert raw ones (``tempered from raw at T=…``:
    `tracegen.export.tokens.tempering`)."""
    kind: str = trace.logprobs_kind
    if kind == "raw":
        temperature = trace.sampling.temperature if trace.sampling else None
        kind = f"raw at T={'?' if temperature is None else f'{temperature:g}'}"
    return kind + CONSTRAINED if trace.grammars and kind != "unknown" else kind


def sampled_logprobs(kind: str) -> bool:
    """Whether logprobs of ``kind`` (`logprobs_kind`) are what TRL's importance-sampling
    correction compares with: log-softmax(logits / T) of the token sampled (``trl`` 1.16.0,
    ``grpo_trainer.py``, which divides the logits by ``temperature`` and asks vLLM for
    ``processed_logprobs``). Raw logprobs are exactly that at T=1 only; at T < 1 they are
    converted where their alternatives allow (`tracegen.export.tokens.tempering`). Logprobs
    of constrained decoding never are (`CONSTRAINED`)."""
    if kind.endswith(CONSTRAINED):
        return False
    return kind in ("processed", "raw at T=1") or kind.startswith("tempered from")


def trl_row(trace: Trace, episode: TokenEpisode, sequence: TokenSequence) -> Row:
    row = episode_fields(trace)
    row["logprobs_kind"] = logprobs_kind(trace)
    row |= {
        "turn": sequence.turn,
        "token_source": episode.source,
        "prompt_ids": sequence.prompt_ids,
        "completion_ids": sequence.completion_ids,
        "logprobs": None if None in sequence.logprobs else sequence.logprobs,
        "env_mask": sequence.env_mask,
    }
    return row


def check_trl(row: Row, texts: list[str], decode: Decoder) -> str | None:
    """Why ``row`` is not a record TRL reads as meant, or None."""
    ids, logprobs = row["completion_ids"], row["logprobs"]
    mask = np.asarray(row["env_mask"])
    if not row["prompt_ids"]:
        return "an empty prompt"
    if len(mask) != len(ids) or (logprobs is not None and len(logprobs) != len(ids)):
        return "completion_ids, env_mask and logprobs differ in length"
    if not np.isin(mask, (0, 1)).all():
        return "env_mask holds a value other than 0 and 1"
    if logprobs is not None and (np.asarray(logprobs, dtype=float)[mask == 0] != 0.0).any():
        return "a token tracegen wrote has a logprob other than 0.0"
    return check_text(ids, mask == 1, texts, decode)


def trl_features() -> Features:
    from datasets import Features, List, Value

    return Features(
        {
            **trace_columns(EPISODE_FIELDS),
            "logprobs_kind": Value("string"),
            "turn": Value("int64"),
            "token_source": Value("string"),
            "prompt_ids": List(Value("int32")),
            "completion_ids": List(Value("int32")),
            "logprobs": List(Value("float64")),
            "env_mask": List(Value("int8")),
        }
    )


# ---------------------------------------------------------------- atropos


def atropos_sample(trace: Trace, episode: TokenEpisode, sequence: TokenSequence) -> Row:
    """One sample of a group; `atropos_groups` gathers the samples of a problem."""
    prompt = [MASKED] * len(sequence.prompt_ids)
    masks = prompt + [
        t if m else MASKED for t, m in zip(sequence.completion_ids, sequence.env_mask, strict=True)
    ]
    logprobs = [MASKED_LOGPROB] * len(prompt) + [
        MASKED_LOGPROB if lp is None or not m else lp
        for lp, m in zip(sequence.logprobs, sequence.env_mask, strict=True)
    ]
    return {
        "problem_id": trace.problem_id,
        "id": trace.id,
        "turn": sequence.turn,
        "token_source": episode.source,
        "tokens": sequence.prompt_ids + sequence.completion_ids,
        "masks": masks,
        "inference_logprobs": logprobs,
        "score": trace.reward,
        "success": trace.success,
        "logprobs_kind": logprobs_kind(trace),
        "error": None if trace.error is None else f"{trace.error.kind}/{trace.error.reason}",
        "messages": [
            {"role": m.role, "content": m.content, "reward": None} for m in trace.messages
        ],
    }


def check_atropos(row: Row, texts: list[str], decode: Decoder) -> str | None:
    """Why ``row`` is not a sample Atropos reads as meant, or None."""
    tokens = row["tokens"]
    masks, logprobs = np.asarray(row["masks"]), np.asarray(row["inference_logprobs"], dtype=float)
    if not len(tokens) == len(masks) == len(logprobs):
        return "tokens, masks and inference_logprobs differ in length"
    masked = masks == MASKED
    if (~masked & (masks != np.asarray(tokens))).any():
        return "a mask is neither -100 nor its token id"
    if (logprobs[masked] != MASKED_LOGPROB).any():
        return "a masked position has an inference logprob other than 1.0"
    return check_text(tokens, ~masked, texts, decode)


def _group(problem_id: str, samples: list[Row]) -> Row:
    return {
        "problem_id": problem_id,
        "tokens": [s["tokens"] for s in samples],
        "masks": [s["masks"] for s in samples],
        "inference_logprobs": [s["inference_logprobs"] for s in samples],
        "scores": [s["score"] for s in samples],
        "successes": [s["success"] for s in samples],
        "errors": [s["error"] for s in samples],
        "logprobs_kinds": [s["logprobs_kind"] for s in samples],
        "messages": [s["messages"] for s in samples],
        "ids": [s["id"] for s in samples],
        "turns": [s["turn"] for s in samples],
        "token_sources": [s["token_source"] for s in samples],
    }


def atropos_groups(samples: Iterator[Row]) -> Iterator[Row]:
    """One group per problem, in order of first appearance, its samples in file order.

    Samples are spilled to a temporary file as they come, with their byte offsets kept per
    problem (8 bytes a sample); each group is then read back alone, so memory holds one group.
    """
    with tempfile.TemporaryFile() as spill:
        offsets: dict[str, array[int]] = {}
        for sample in samples:
            offsets.setdefault(sample["problem_id"], array("q")).append(spill.tell())
            spill.write(orjson.dumps(sample, option=orjson.OPT_APPEND_NEWLINE))
        for problem_id, where in offsets.items():
            group = []
            for offset in where:
                spill.seek(offset)
                group.append(orjson.loads(spill.readline()))
            yield _group(problem_id, group)


def atropos_features() -> Features:
    from datasets import Features, List, Value

    string = Value("string")
    message = {"role": string, "content": string, "reward": Value("float64")}
    return Features(
        {
            "problem_id": string,
            "tokens": List(List(Value("int32"))),
            "masks": List(List(Value("int32"))),
            "inference_logprobs": List(List(Value("float64"))),
            "scores": List(Value("float64")),
            "successes": List(Value("bool")),
            "errors": List(string),
            "logprobs_kinds": List(string),
            "messages": List(List(message)),
            "ids": List(string),
            "turns": List(Value("int64")),
            "token_sources": List(string),
        }
    )
