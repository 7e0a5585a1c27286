"""What every mode shares: the conversation so far, its requests and executions, the Trace.

A mode subclasses `TracedMode` and writes only its protocol (``converse``), where its final
program is (``final_code``) and its structure criteria (``structure_ok``). `Session` keeps
the books: messages exactly as exchanged, typed steps (model or system), metrics, usage,
hosts and logprobs; it enforces the limits and grades the final program.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from typing import Any, ClassVar

from tracegen.data.prompts import task_message
from tracegen.episode.feedback import execution_feedback
from tracegen.episode.limits import EpisodeEnded, backend_failure, limit_reached, repeated_tail
from tracegen.episode.spec import Episode
from tracegen.errors import AuthError, BackendError, BadRequest, ModelNotFound
from tracegen.grading.answers import grade_answer
from tracegen.grading.reward import rescore
from tracegen.llm.base import ChatOptions, ChatRequest, Completion, ContinueMethod
from tracegen.parsing.program import defines
from tracegen.parsing.segment import open_blocks, segment, strip_system_tags
from tracegen.schema import (
    ChatMessage,
    ExecResult,
    LogprobsStatus,
    Metrics,
    Step,
    TokenLogprob,
    ToolCall,
    Trace,
    TraceError,
    TurnLogprobs,
    Usage,
)

SYSTEM_TAG_STOPS = ("\n<result>", "\n<error>", "\n<tool_response>")
"""Stop before a result the model starts to invent on a line of its own. Without the line
break they could stop inside code (``print("<result>")``); one written mid-line is stripped."""
FATAL_BACKEND_ERRORS = (ModelNotFound, AuthError, BadRequest)


def close_stop(tag: str) -> str:
    """The stop sequence that ends a turn after ``</tag>``. For code it needs the line break
    after the tag, so that ``"</code>"`` inside a string literal does not end the turn."""
    return "</code>\n" if tag == "code" else f"</{tag}>"


def reclose(text: str, tags: Sequence[str]) -> str:
    """Put back the closing tag a stop sequence removed: that of the innermost of ``tags``
    left open."""
    innermost = next((t for t in reversed(open_blocks(text)) if t in tags), None)
    return text if innermost is None else f"{text}</{innermost}>"


class Session:
    """The books of one episode."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.problem = episode.problem
        self.settings = episode.settings
        self.think = episode.settings.think
        self.tested = episode.problem.kind == "code"
        self.messages = [
            ChatMessage(role="system", content=episode.system_prompt),
            ChatMessage(role="user", content=task_message(episode.problem)),
        ]
        self.steps: list[Step] = []
        self.metrics = Metrics()
        self.usage = Usage()
        self.hosts: list[str] = []
        self.continuation: ContinueMethod | None = None
        self._logprobs: dict[int, list[TokenLogprob]] = {}
        self._logprobs_missing: set[int] = set()
        self.executed: list[str] = []
        self._verdicts: dict[str, ExecResult] = {}
        self._started = time.perf_counter()

    # ------------------------------------------------------------ requests

    def require_turn(self) -> None:
        """End the episode now if the model may not answer again."""
        if self.metrics.turns >= self.settings.max_steps:
            raise limit_reached(
                "max_steps", f"the episode used all {self.settings.max_steps} model turns"
            )

    def _request(self, stop: Sequence[str], tools: list[dict[str, Any]] | None) -> ChatRequest:
        s = self.settings
        self.require_turn()
        options = ChatOptions(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=self.episode.seed,
            num_predict=s.max_tokens,
            num_ctx=s.num_ctx,
            stop=list(stop),
        )
        return ChatRequest(
            messages=list(self.messages),
            tools=tools,
            think=self.think,
            options=options,
            top_logprobs=s.top_logprobs,
        )

    async def generate(
        self, stop: Sequence[str], tools: list[dict[str, Any]] | None = None
    ) -> Completion:
        """One model turn answering the messages so far."""
        request = self._request(stop, tools)
        return await self._count(self.episode.backend.chat(request))

    async def continue_assistant(self, stop: Sequence[str]) -> Completion:
        """More of the assistant message that ends the conversation (prefill or raw)."""
        method = self.settings.continuation
        request = self._request(stop, None)
        completion = await self._count(self.episode.backend.continue_message(request, method))
        self.continuation = completion.continuation or method
        return completion

    async def _count(self, call: Awaitable[Completion]) -> Completion:
        started = time.perf_counter()
        completion = await call
        self.metrics.generation_s += time.perf_counter() - started
        self.metrics.turns += 1
        self.metrics.prompt_tokens += completion.prompt_eval_count
        self.metrics.completion_tokens += completion.eval_count
        u = self.usage
        u.requests += 1
        u.prompt_eval_count += completion.prompt_eval_count
        u.eval_count += completion.eval_count
        u.total_duration_ns += completion.total_duration_ns
        u.load_duration_ns += completion.load_duration_ns
        u.prompt_eval_duration_ns += completion.prompt_eval_duration_ns
        u.eval_duration_ns += completion.eval_duration_ns
        if completion.host and completion.host not in self.hosts:
            self.hosts.append(completion.host)
        return completion

    def check_cut(self, completion: Completion) -> None:
        """End the episode if the turn ran into ``max_tokens`` (a repeating tail says why)."""
        if completion.done_reason != "length":
            return
        if repeated_tail(completion.content or completion.thinking):
            self.metrics.repetition_stops += 1
            raise EpisodeEnded("limit", "repetition", "the model repeated itself until max_tokens")
        raise limit_reached(
            "max_tokens", f"a model turn reached max_tokens={self.settings.max_tokens}"
        )

    # ------------------------------------------------------------ recording

    def strip(self, text: str) -> str:
        """The model's text without the system tags it wrote itself (counted)."""
        clean, stripped = strip_system_tags(text)
        self.metrics.hallucinated_results += stripped
        return clean

    def count_strategy(self, strategy: str) -> None:
        """A tool call was read (``strict``, ``escaped``, ``extracted``, ``native``)."""
        counts = self.metrics.parse_strategies
        counts[strategy] = counts.get(strategy, 0) + 1

    def add_assistant(
        self,
        completion: Completion,
        content: str,
        tool_calls: list[ToolCall] | None = None,
        said: str | None = None,
    ) -> int:
        """Append the model's turn (``content`` as kept) and its native thinking; its index.

        ``said`` is the model's text whose tokens are kept, when it is not ``content`` (tool
        calls taken out of the text are still the model's tokens).
        """
        thinking = completion.thinking or None
        message = ChatMessage(
            role="assistant", content=content, thinking=thinking, tool_calls=tool_calls or None
        )
        self.messages.append(message)
        index = len(self.messages) - 1
        if thinking:
            self.steps.append(Step(kind="think", text=thinking, message_index=index))
        self._add_logprobs(index, completion, content if said is None else said)
        return index

    def extend_assistant(self, completion: Completion, text: str) -> None:
        """Append the model's continuation to the last (assistant) message."""
        message = self.messages[-1]
        message.content += text
        if completion.thinking:
            message.thinking = (message.thinking or "") + completion.thinking
        self._add_logprobs(len(self.messages) - 1, completion, text)

    def add_message(self, role: str, content: str, tool_name: str | None = None) -> int:
        """A message the system writes (feedback, a nudge, a tool result) for the model's next
        turn, which must be allowed (else the episode ends here); its index."""
        self.require_turn()
        self.messages.append(ChatMessage(role=role, content=content, tool_name=tool_name))  # type: ignore[arg-type]
        return len(self.messages) - 1

    def append_system_text(
        self, kind: str, text: str, body: str, exec_index: int | None = None
    ) -> None:
        """Text the system writes into the last (assistant) message; ``body`` is its step."""
        self.messages[-1].content += text
        self.system_step(kind, body, len(self.messages) - 1, exec_index)

    def model_steps(self, text: str, index: int, open_tag: str | None = None) -> list[Step]:
        """The typed steps of model text in message ``index``, added to the trace;
        ``open_tag`` is a block the text continues (opened in an earlier piece)."""
        prefix = f"<{open_tag}>" if open_tag else ""
        steps = [s.model_copy(update={"message_index": index}) for s in segment(prefix + text)]
        self.steps.extend(steps)
        return steps

    def system_step(self, kind: str, text: str, index: int, exec_index: int | None = None) -> None:
        self.steps.append(
            Step(kind=kind, text=text, source="system", message_index=index, exec_index=exec_index)  # type: ignore[arg-type]
        )

    def _add_logprobs(self, index: int, completion: Completion, kept: str) -> None:
        if completion.logprobs is None:
            self._logprobs_missing.add(index)
            return
        tokens = completion.logprobs
        if len(kept) < len(completion.content):
            tokens = _prefix(tokens, len(completion.thinking) + len(kept))
        self._logprobs.setdefault(index, []).extend(tokens)

    async def tag_turn(self, close_on: Sequence[str] = ()) -> list[Step]:
        """One turn of a tag mode: stop on the system's tags and on ``</t>`` for ``t`` in
        ``close_on`` (the closing tag the server removed is put back); its model steps."""
        completion = await self.generate([*SYSTEM_TAG_STOPS, *map(close_stop, close_on)])
        content = self.strip(completion.content)
        if completion.done_reason == "stop" and content == completion.content:
            content = reclose(content, close_on)
        index = self.add_assistant(completion, content)
        steps = self.model_steps(content, index)
        self.check_cut(completion)
        return steps

    # ------------------------------------------------------------ execution

    async def run_tests(self, code: str) -> ExecResult:
        if code not in self._verdicts:
            self._verdicts[code] = await self._timed(
                self.episode.sandbox.run_tests(code, self.problem)
            )
        return self._verdicts[code]

    async def _timed(self, call: Awaitable[ExecResult]) -> ExecResult:
        started = time.perf_counter()
        result = await call
        self.metrics.execution_s += time.perf_counter() - started
        return result

    async def execute(self, code: str, *, script: bool = False) -> ExecResult:
        """Run code whose result goes back to the model: one of ``max_iterations``.

        Code problems run against their tests, math problems (and ``script``) as a script.
        """
        if self.metrics.executions >= self.settings.max_iterations:
            raise limit_reached(
                "max_iterations", f"the episode used all {self.settings.max_iterations} executions"
            )
        if self.tested and not script:
            result = await self.run_tests(code)
        else:
            result = await self._timed(self.episode.sandbox.run_code(code))
        self.executed.append(code)
        self.metrics.executions += 1
        self.metrics.exec_timeouts += result.status == "timeout"
        return result

    @property
    def last_exec(self) -> int:
        return self.metrics.executions - 1

    def require_iteration(self) -> None:
        """End the episode now if no execution is left for another attempt."""
        if self.metrics.executions >= self.settings.max_iterations:
            raise limit_reached(
                "max_iterations",
                f"the tests still fail after {self.settings.max_iterations} executions",
            )

    def add_feedback(self, result: ExecResult) -> None:
        """A tag mode's feedback: ``<result>``/``<error>`` in a user message, a system step."""
        tag, text = execution_feedback(result, self.problem, tested=self.tested)
        index = self.add_message("user", f"<{tag}>\n{text}\n</{tag}>")
        self.system_step(tag, text, index, self.last_exec)

    # ------------------------------------------------------------ the trace

    def model_code(self) -> list[str]:
        return [s.text for s in self.steps if s.kind == "code" and s.source == "model"]

    async def finish(self, mode: TracedMode, error: TraceError | None) -> Trace:
        final_code = mode.final_code(self)
        final_answer = None
        if self.problem.kind == "math":
            replies = [m.content for m in self.messages if m.role == "assistant"]
            final_answer = mode.final_answer(replies[-1] if replies else "")
            verdict = grade_answer(self.problem, final_answer)
        else:
            verdict = await self.run_tests(final_code) if final_code else None
        m = self.metrics
        model_steps = [s for s in self.steps if s.source == "model"]
        m.think_segments = sum(s.kind == "think" for s in model_steps)
        m.code_blocks = sum(s.kind == "code" for s in model_steps)
        m.latency_s = time.perf_counter() - self._started
        turns = sum(msg.role == "assistant" for msg in self.messages)
        trace = Trace(
            id=self.episode.trace_id,
            problem_id=self.problem.id,
            sample=self.episode.sample,
            mode=mode.name,
            model=self.settings.model,
            hosts=self.hosts,
            settings_hash=self.episode.settings_hash,
            messages=self.messages,
            steps=self.steps,
            final_code=final_code,
            final_answer=final_answer,
            verdict=verdict,
            metrics=m,
            logprobs=[
                TurnLogprobs(message_index=i, tokens=t)
                for i, t in sorted(self._logprobs.items())
                if i not in self._logprobs_missing
            ],
            logprobs_status=_logprobs_status(turns, bool(self._logprobs_missing)),
            continuation=self.continuation,
            usage=self.usage,
            error=error,
        )
        clean = error is None and m.hallucinated_results == 0
        return rescore(trace, clean and mode.structure_ok(trace))


def _logprobs_status(turns: int, missing: bool) -> LogprobsStatus:
    if missing:
        return "absent"
    return "present" if turns else "not_requested"


def turn_kinds(trace: Trace) -> list[list[str]]:
    """The kinds of the model's steps in each assistant message, in order."""
    return [
        [s.kind for s in trace.steps if s.message_index == i and s.source == "model"]
        for i, m in enumerate(trace.messages)
        if m.role == "assistant"
    ]


def _prefix(tokens: list[TokenLogprob], chars: int) -> list[TokenLogprob]:
    """The tokens that produced the first ``chars`` characters of a turn."""
    kept: list[TokenLogprob] = []
    length = 0
    for token in tokens:
        if length >= chars:
            break
        kept.append(token)
        length += len(token.token)
    return kept


class TracedMode(ABC):
    """A mode built on `Session`; see ``modes/base.py`` for the contract with the runner."""

    name: ClassVar[str]
    default_think: ClassVar[bool | None] = None
    """Server-side thinking (Ollama ``think``) when the ``think`` setting is unset (None: the
    field is not sent, the server decides)."""

    async def run(self, episode: Episode) -> Trace:
        session = Session(episode)
        if session.think is None:
            session.think = self.default_think
        error: TraceError | None = None
        try:
            await self.converse(session)
        except EpisodeEnded as e:
            error = e.error
        except FATAL_BACKEND_ERRORS:
            raise
        except BackendError as e:
            error = backend_failure(e)
        return await session.finish(self, error)

    @abstractmethod
    async def converse(self, session: Session) -> None:
        """Hold the conversation; raise `EpisodeEnded` to stop early."""

    @abstractmethod
    def structure_ok(self, trace: Trace) -> bool:
        """The mode's structure criteria for ``is_ideal`` (README, ## Modes); an episode
        with an error or stripped text never meets them."""

    def final_code(self, session: Session) -> str | None:
        """The program that is scored: by default the model's last code block, else the last
        script it ran that defines the entry point."""
        code = session.model_code()
        if code:
            return code[-1]
        entry = session.problem.entry_point
        return next((c for c in reversed(session.executed) if defines(c, entry)), None)

    def final_answer(self, reply: str) -> str | None:
        """A math problem's answer in the last assistant message."""
        from tracegen.grading.answers import extract_final_answer  # loads the problem loaders

        return extract_final_answer(reply)
