"""Raw logprobs turned into the tempered distribution's, where that can be done exactly enough.

TRL's importance-sampling correction compares each sampled token's logprob under
log-softmax(logits / T) (``trl`` 1.16.0, ``grpo_trainer.py``). A backend's raw logprob is
log-softmax(logits): dividing it by T is not enough, the normaliser changes too:

    log p_T(i) = l_i / T − log Σ_j exp(l_j / T)      (l: raw logprobs, j over the vocabulary)

The sum needs every token of the vocabulary; a trace has the sampled token and its
``--top-logprobs`` alternatives. For T < 1 the rest is bounded: together the unlisted
tokens hold m = 1 − Σ listed p, and each has p ≤ q = min(the least alternative's, m), so
Σ_unlisted p^(1/T) ≤ q^(1/T − 1) · m. The tempered logprob then lies in an interval;
when that interval is narrower than `TOLERANCE` its middle is written, else the token (and
its episode) is left as it was recorded. For T > 1 the unlisted tokens can weigh more than
the listed ones (the bound needs the vocabulary's size): nothing is converted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tracegen.schema import TokenLogprob, TokenRequest, Trace

TOLERANCE = 1e-3
"""The widest interval, in nats, a converted logprob may come from."""


def tempered_logprob(token: TokenLogprob, temperature: float) -> float | None:
    """``token``'s logprob under log-softmax(logits / ``temperature``), from its raw logprob
    and its alternatives', within `TOLERANCE`; None when the alternatives do not bound it."""
    if not 0.0 < temperature < 1.0:
        return None
    alternatives = [alt.logprob for alt in token.top_logprobs]
    listed = list(alternatives)
    if not any(
        alt.token == token.token and math.isclose(alt.logprob, token.logprob, abs_tol=1e-9)
        for alt in token.top_logprobs
    ):
        listed.append(token.logprob)
    scaled = [lp / temperature for lp in listed]
    top = max(scaled)
    listed_sum = math.fsum(math.exp(s - top) for s in scaled)
    tail_mass = max(0.0, 1.0 - math.fsum(math.exp(lp) for lp in listed))
    # An unlisted token is no likelier than the least listed alternative, nor than the tail.
    largest = min(math.exp(min(alternatives)), tail_mass) if alternatives else tail_mass
    tail_bound = largest ** (1.0 / temperature - 1.0) * tail_mass
    high = token.logprob / temperature - (top + math.log(listed_sum))
    low = token.logprob / temperature - (top + math.log(listed_sum + tail_bound * math.exp(-top)))
    if high - low > TOLERANCE:
        return None
    return (high + low) / 2


def tempered_requests(trace: Trace, temperature: float) -> list[TokenRequest] | None:
    """The trace's `TokenRequest`s with every sampled token's logprob tempered, or None when
    one cannot be (no logprob, no alternatives recorded for it, or too wide a bound).

    A request's logprobs are matched, in order, with the tokens recorded for its message
    (`Trace.logprobs`, which hold the alternatives): the same id and logprob at the same
    place. A request whose tokens were not all recorded there (a tail cut from the message's
    text) cannot be converted."""
    recorded: dict[int, list[TokenLogprob]] = {t.message_index: t.tokens for t in trace.logprobs}
    taken: dict[int, int] = {}
    out = []
    for request in trace.token_requests:
        if request.logprobs is None:
            return None
        tokens = recorded.get(request.message_index, [])
        at = taken.get(request.message_index, 0)
        converted = []
        for token_id, logprob in zip(request.completion_ids, request.logprobs, strict=True):
            if not _same(tokens, at, token_id, logprob):
                return None
            value = tempered_logprob(tokens[at], temperature)
            if value is None:
                return None
            converted.append(value)
            at += 1
        taken[request.message_index] = at
        out.append(request.model_copy(update={"logprobs": converted}))
    return out


def _same(tokens: Sequence[TokenLogprob], at: int, token_id: int, logprob: float) -> bool:
    """Whether the token recorded at ``at`` is this sampled token."""
    if at >= len(tokens):
        return False
    token = tokens[at]
    return token.id == token_id and math.isclose(token.logprob, logprob, abs_tol=1e-9)
