"""The end of an episode: the final program graded, the metrics totted up, the `Trace` built
and scored (`tracegen.grading.reward`)."""

from __future__ import annotations

import time
from typing import Protocol

from tracegen.episode.session import Session
from tracegen.grading.answers import extract_final_answer, grade_answer
from tracegen.grading.reward import rescore
from tracegen.schema import ExecResult, Sampling, Trace, TraceError


class Scoring(Protocol):
    """What a mode says about its own episodes."""

    def final_code(self, session: Session) -> str | None:
        """The program that is scored."""
        ...

    def structure_ok(self, trace: Trace) -> bool:
        """The mode's structure criteria for ``is_ideal``."""
        ...


async def assemble(session: Session, scoring: Scoring, error: TraceError | None) -> Trace:
    """The scored trace of ``session``; ``error`` when it ended early."""
    transcript, m = session.transcript, session.metrics
    final_code = scoring.final_code(session)
    final_answer = None
    verdict: ExecResult | None
    if session.problem.kind == "math":
        replies = transcript.assistant_replies()
        final_answer = extract_final_answer(replies[-1]) if replies else None
        verdict = grade_answer(session.problem, final_answer)
    else:
        verdict = await session.runs.run_tests(final_code) if final_code else None
    model_steps = [s for s in transcript.steps if s.source == "model"]
    m.think_segments = sum(s.kind == "think" for s in model_steps)
    m.code_blocks = sum(s.kind == "code" for s in model_steps)
    m.latency_s = time.perf_counter() - session.started
    trace = Trace(
        **session.spec.identity(),
        hosts=session.turns.hosts,
        messages=transcript.messages,
        steps=transcript.steps,
        final_code=final_code,
        final_answer=final_answer,
        verdict=verdict,
        metrics=m,
        logprobs=transcript.logprobs(),
        logprobs_status=transcript.logprobs_status(),
        logprobs_kind=transcript.logprobs_kind(),
        sampling=Sampling(
            temperature=session.settings.temperature,
            top_p=session.settings.top_p,
            top_k=session.settings.top_k,
        ),
        continuation=session.turns.continuation,
        token_requests=transcript.token_requests,
        grammars=session.turns.grammars,
        tool_path=session.tool_path,
        usage=session.turns.usage,
        error=error,
    )
    clean = error is None and m.hallucinated_results == 0
    return rescore(trace, clean and scoring.structure_ok(trace))
