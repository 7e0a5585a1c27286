"""`TracegenResourcesServer`: tracegen's judge as a NeMo-Gym resources server (``nemo-gym``
0.7, ``nemo_gym/base_resources_server.py``).

``POST /verify`` takes NeMo-Gym's verify request (``responses_create_params``, the policy's
``response``) and the problem it answers (``verifier_metadata.problem_id``, a problem of the
server's set: its tests never travel with the request). The final program is read from the
response as tracegen reads a model's turn (``<code>`` blocks and fenced code in the text,
the ``code`` of ``python`` function calls; the last that defines the entry point, else the
last) and judged in tracegen's sandbox as ``tracegen verify`` judges it; a math problem's
answer is the text's final answer. The reward is 1.0 when every test passes, else 0.0; a
sandbox that cannot run gives ``mask_sample`` and ``verifier_error``, never a wrong verdict.
``/seed_session`` and ``/aggregate_metrics`` are NeMo-Gym's own (no per-rollout state).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import FastAPI
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from pydantic import Field, PrivateAttr

from tracegen.config import RunSettings
from tracegen.errors import SandboxError
from tracegen.generate.worker import EpisodeWorker
from tracegen.grading.answers import extract_final_answer
from tracegen.grading.programs import ProgramJudge
from tracegen.grading.verdicts import Solution, verify_one
from tracegen.parsing.program import final_program
from tracegen.parsing.segment import segment
from tracegen.problems import load_problems
from tracegen.sandbox.programs import Programs
from tracegen.schema import Problem


class TracegenResourcesServerConfig(BaseResourcesServerConfig):
    tracegen: dict[str, Any] = Field(
        default_factory=dict,
        description="tracegen run's settings: problems, problem_ids, limit, sandbox, "
        "exec_timeout (the rest do not apply to judging)",
    )


class TracegenVerifyRequest(BaseVerifyRequest):
    verifier_metadata: dict[str, Any] = Field(
        description="{'problem_id': ID}: the problem of the server's set the response answers"
    )


class TracegenVerifyResponse(BaseVerifyResponse):
    problem_id: str
    program: str | None = None
    answer: str | None = None
    verdict: str
    passed: int
    total: int


class TracegenResourcesServer(SimpleResourcesServer):
    config: TracegenResourcesServerConfig
    _settings: RunSettings = PrivateAttr()
    _problems: dict[str, Problem] = PrivateAttr()
    _worker: EpisodeWorker | None = PrivateAttr(default=None)
    _judge: ProgramJudge | None = PrivateAttr(default=None)
    _opening: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)

    def model_post_init(self, context: Any) -> None:
        self._settings = s = RunSettings(**self.config.tracegen)
        problems = load_problems(s.problems, limit=s.limit, problem_ids=s.problem_ids)
        self._problems = {p.id: p for p in problems}

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.router.on_shutdown.append(self.aclose)
        return app

    async def worker(self) -> tuple[EpisodeWorker, ProgramJudge]:
        """The warm worker whose sandbox judges every response, and its program judge."""
        async with self._opening:
            if self._worker is None or self._judge is None:
                self._worker = await EpisodeWorker(self._settings).open()
                self._judge = ProgramJudge(Programs.cached_on_disk(self._worker.sandbox))
        return self._worker, self._judge

    async def aclose(self) -> None:
        if self._worker is not None:
            worker, self._worker, self._judge = self._worker, None, None
            await worker.aclose()

    async def verify(self, body: TracegenVerifyRequest) -> TracegenVerifyResponse:
        problem_id = str(body.verifier_metadata.get("problem_id", ""))
        problem = self._problems.get(problem_id)
        if problem is None:
            raise ValueError(f"no problem {problem_id!r} in {self._settings.problems}")
        text = body.response.output_text or ""
        program = final_program(_programs(body.response, text), problem.entry_point)
        answer = extract_final_answer(text) if problem.kind == "math" else None
        fields: dict[str, Any] = {"problem_id": problem_id, "program": program, "answer": answer}
        try:
            worker, judge = await self.worker()
            solution = Solution(0, problem, program, answer, None)
            verdict = await verify_one(solution, worker.sandbox, judge)
        except SandboxError as e:
            return TracegenVerifyResponse(
                **body.model_dump(),
                **fields,
                reward=0.0,
                mask_sample=True,
                failure_kind="verifier_error",
                failure_reason=str(e),
                verdict="error",
                passed=0,
                total=len(problem.tests),
            )
        return TracegenVerifyResponse(
            **body.model_dump(),
            **fields,
            reward=1.0 if verdict.status == "ok" else 0.0,
            verdict=verdict.status,
            passed=verdict.passed,
            total=verdict.total,
        )


def _programs(response: Any, text: str) -> list[str]:
    """The programs a response holds, in order: the ``code`` of its ``python`` function
    calls, then the code blocks of its text."""
    found = []
    for item in response.output or []:
        if getattr(item, "type", None) == "function_call" and getattr(item, "name", "") == "python":
            try:
                code = orjson.loads(item.arguments).get("code")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            if isinstance(code, str):
                found.append(code)
    return found + [s.text for s in segment(text) if s.kind == "code"]


if __name__ == "__main__":
    TracegenResourcesServer.run_webserver()
