"""Raw logprobs turned into log-softmax(logits / T), what TRL compares with, where the
recorded alternatives bound the vocabulary's tail closely enough."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.support.token_traces import ChatmlModel, make_tokenizer, tool_feedback
from tests.support.traces import write_traces
from tracegen.export.tokens.tempering import TOLERANCE, tempered_logprob
from tracegen.schema import Sampling, TokenLogprob, TopLogprob, Trace


def _vocabulary(seed: int, size: int = 5000) -> np.ndarray:
    """Raw logprobs of a peaked distribution over ``size`` tokens, as a model gives."""
    logits = np.random.default_rng(seed).standard_normal(size) * 3.0
    logits[0] += 12.0
    return logits - np.logaddexp.reduce(logits)


def _token(raw: np.ndarray, sampled: int, top: int) -> TokenLogprob:
    order = np.argsort(raw)[::-1][:top]
    alternatives = [TopLogprob(token=f"t{j}", logprob=float(raw[j])) for j in order]
    return TokenLogprob(token=f"t{sampled}", logprob=float(raw[sampled]), top_logprobs=alternatives)


@pytest.mark.parametrize("temperature", [0.3, 0.7])
def test_a_converted_logprob_is_within_the_tolerance_of_the_exact_one(temperature: float) -> None:
    converted = 0
    for seed in range(20):
        raw = _vocabulary(seed)
        exact_all = raw / temperature - np.logaddexp.reduce(raw / temperature)
        for sampled in (0, int(np.argsort(raw)[-2])):
            value = tempered_logprob(_token(raw, sampled, 20), temperature)
            if value is not None:
                converted += 1
                assert abs(value - exact_all[sampled]) <= TOLERANCE / 2 + 1e-12
    assert converted > 0


def test_nothing_is_converted_without_a_bound() -> None:
    raw = _vocabulary(0)
    flat = np.full(50, -math.log(50))
    assert tempered_logprob(_token(raw, 0, 20), 1.5) is None  # T > 1: no bound
    assert tempered_logprob(_token(flat, 0, 2), 0.7) is None  # most mass unlisted


def _with_alternatives(trace: Trace, temperature: float) -> Trace:
    """``trace`` as raw logprobs sampled at ``temperature``, each token with one alternative
    holding all but 1e-7 of the rest of the mass."""
    for turn in trace.logprobs:
        for token in turn.tokens:
            rest = math.log(1.0 - math.exp(token.logprob) - 1e-7)
            token.top_logprobs = [
                TopLogprob(token=token.token, logprob=token.logprob),
                TopLogprob(token="other", logprob=rest),
            ]
    return trace.model_copy(
        update={"logprobs_kind": "raw", "sampling": Sampling(temperature=temperature)}
    )


def _expected(logprob: float, temperature: float) -> float:
    rest = math.log(1.0 - math.exp(logprob) - 1e-7)
    return logprob / temperature - float(np.logaddexp(logprob / temperature, rest / temperature))


def _convert_to_trl(trace_file: Path) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    """``tracegen convert TRACES --rl trl`` in a child process: its result and the rows it
    wrote (``TRACES.rl-trl.jsonl``)."""
    result = subprocess.run(
        [sys.executable, "-m", "tracegen", "convert", str(trace_file), "--rl", "trl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    written = trace_file.with_name(f"{trace_file.stem}.rl-trl.jsonl")
    return result, [orjson.loads(line) for line in written.read_bytes().splitlines()]


def test_trl_records_carry_tempered_logprobs_and_say_so(tmp_path: Path) -> None:
    model = ChatmlModel(make_tokenizer(tmp_path / "tok"))
    raw = _with_alternatives(tool_feedback(model), 0.5)
    kept = tool_feedback(model, 1).model_copy(
        update={"logprobs_kind": "raw", "sampling": Sampling(temperature=0.5)}
    )
    trace_file = write_traces(tmp_path / "t.jsonl", [raw, kept])
    result, rows = _convert_to_trl(trace_file)
    converted, as_recorded = rows
    assert converted["logprobs_kind"] == "tempered from raw at T=0.5"
    sampled = [lp for lp, m in zip(converted["logprobs"], converted["env_mask"], strict=True) if m]
    recorded = [lp for r in raw.token_requests for lp in r.logprobs or []]
    assert sampled == pytest.approx([_expected(lp, 0.5) for lp in recorded], abs=TOLERANCE)
    assert as_recorded["logprobs_kind"] == "raw at T=0.5"
    model_lps = [lp for r in kept.token_requests for lp in r.logprobs or []]
    kept_lps = as_recorded["logprobs"]
    assert [lp for lp, m in zip(kept_lps, as_recorded["env_mask"], strict=True) if m] == model_lps
    assert "logprobs tempered from raw at T=0.5 1, raw at T=0.5 1" in result.stderr
    assert "1 episodes carry logprobs that are not the sampling distribution's" in result.stderr


def test_logprobs_of_a_grammar_constrained_episode_are_their_own_kind_and_warned_of(
    tmp_path: Path,
) -> None:
    """Decoding under a grammar masks the sampler: the recorded logprobs (the model's before
    the mask) are not what was sampled from, whatever their kind."""
    model = ChatmlModel(make_tokenizer(tmp_path / "tok"))
    constrained = tool_feedback(model).model_copy(
        update={"logprobs_kind": "processed", "grammars": {"think_code": "0" * 64}}
    )
    free = tool_feedback(model, 1).model_copy(update={"logprobs_kind": "processed"})
    trace_file = write_traces(tmp_path / "t.jsonl", [constrained, free])
    result, rows = _convert_to_trl(trace_file)
    assert [r["logprobs_kind"] for r in rows] == ["processed under a grammar", "processed"]
    assert "1 episodes were decoded under a grammar" in result.stderr
    assert "--constrain off" in result.stderr
