"""What every backend does the same way, each against a stand-in of its server.

`tests.support.backends.BACKENDS` lists them: Ollama, the OpenAI-compatible backend in each
server flavour (vLLM, SGLang, llama.cpp's server, LM Studio), and the embedded one over a
scripted engine (its HTTP statuses and transport faults do not exist: no wire).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.backends import BACKENDS, IN_PROCESS, Served, serve
from tests.support.fake_model import END_OF_TURN, Fault, Reply
from tests.support.fake_openai import grammar_sent
from tracegen.errors import AuthError, BadRequest, ConfigError, ModelNotFound
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.grammar import Grammar, alt
from tracegen.schema import ChatMessage

ANSWER = "<think>Add them.</think>\n<code>\ndef add(a, b):\n    return a + b\n</code>"
PARTIAL = "<think>Try it.\n<tool_call>{}</tool_call>\n<tool_response>{}</tool_response>"
every_backend = pytest.mark.parametrize("name", list(BACKENDS))
every_wire = pytest.mark.parametrize("name", [n for n in BACKENDS if n not in IN_PROCESS])


def request(*messages: tuple[str, str], **kw: Any) -> ChatRequest:
    msgs = messages or (("user", "write add"),)
    return ChatRequest(messages=[ChatMessage(role=r, content=c) for r, c in msgs], **kw)  # type: ignore[arg-type]


def attempts(served: Served) -> int:
    return len(served.generations())


@every_backend
async def test_an_answer_comes_back_whole_with_its_logprobs(name: str) -> None:
    async with serve(name) as s:
        s.model.script(ANSWER)
        c = await s.backend.chat(request(top_logprobs=2))
    assert (c.content, c.finish_reason) == (ANSWER, "stop")
    assert c.logprobs is not None and "".join(t.token for t in c.logprobs).startswith(ANSWER)
    assert all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in c.logprobs)
    assert c.prompt_tokens > 0 and c.completion_tokens >= len(c.logprobs) - 1


@every_backend
async def test_a_stop_string_cuts_the_answer_before_it(name: str) -> None:
    async with serve(name) as s:
        s.model.script("<code>print(1)</code>\n<result>1</result>")
        c = await s.backend.chat(request(options=SamplingOptions(stop=["<result>"])))
    assert (c.content, c.finish_reason) == ("<code>print(1)</code>\n", "stop")


@every_backend
async def test_max_tokens_cuts_the_answer_and_says_length(name: str) -> None:
    async with serve(name) as s:
        s.model.script(ANSWER)
        c = await s.backend.chat(request(options=SamplingOptions(max_tokens=3)))
    assert c.finish_reason == "length" and 0 < len(c.content) < len(ANSWER)


@every_backend
async def test_no_logprobs_asked_none_returned(name: str) -> None:
    async with serve(name) as s:
        s.model.script(ANSWER, Reply(content=ANSWER, logprobs=False))
        assert (await s.backend.chat(request(logprobs=False))).logprobs is None
        assert (await s.backend.chat(request())).logprobs is None


@every_backend
async def test_token_ids_are_the_prompt_the_model_saw_and_every_sampled_token(name: str) -> None:
    async with serve(name) as s:
        s.model.script(ANSWER)
        c = await s.backend.chat(request())
        if not s.backend.capabilities.token_ids:
            assert c.prompt_ids is None and c.completion_ids is None
            return
        assert c.prompt_ids is not None and c.completion_ids is not None
        assert s.model.vocab.decode(c.prompt_ids) == s.model.prompts[-1]
        assert s.model.vocab.decode(c.completion_ids).removesuffix(END_OF_TURN) == ANSWER
        assert (
            c.logprobs is not None
            and [t.id for t in c.logprobs] == c.completion_ids[: len(c.logprobs)]
        )


@every_backend
async def test_continuing_returns_only_new_text_and_the_model_saw_no_end_of_turn(
    name: str,
) -> None:
    async with serve(name) as s:
        methods = s.backend.capabilities.continuation
        partial = request(("user", "go"), ("assistant", PARTIAL))
        if not methods:
            with pytest.raises(ConfigError, match="choices that do: none"):
                await s.backend.continue_message(partial, "auto")
            return
        for method in methods:
            s.model.script(" It prints 2.</think>")
            c = await s.backend.continue_message(partial, method)
            assert (c.content, c.continuation) == (" It prints 2.</think>", method)
            prompt = s.model.prompts[-1]
            assert prompt.endswith(f"<|im_start|>assistant\n{PARTIAL}"), f"{method}: {prompt!r}"
        s.model.script("!")
        assert (await s.backend.continue_message(partial, "auto")).continuation == methods[0]


@every_backend
async def test_a_continuation_method_the_server_lacks_is_refused_naming_those_it_has(
    name: str,
) -> None:
    async with serve(name) as s:
        offered = s.backend.capabilities.continuation
        for lacking in (m for m in ("prefill", "raw", "continue") if m not in offered):
            partial = request(("user", "go"), ("assistant", "x"))
            with pytest.raises(ConfigError, match=f"--continuation {lacking} does not work"):
                await s.backend.continue_message(partial, lacking)
        assert attempts(s) == 0


@every_backend
async def test_a_grammar_goes_where_the_server_reads_it_or_is_refused(name: str) -> None:
    grammar = Grammar("yes-no", {"root": alt("yes", "no")})
    constrained = request(options=SamplingOptions(grammar=grammar))
    async with serve(name) as s:
        s.model.script("yes")
        if not s.backend.capabilities.grammar:
            with pytest.raises(ConfigError, match="takes no grammar"):
                await s.backend.chat(constrained)
            assert attempts(s) == 0
            return
        c = await s.backend.chat(constrained)  # the stand-in refuses a field it does not read
    assert c.content == "yes"
    assert [grammar_sent(body) for body in s.generations()] == [grammar.gbnf]


@every_wire
@pytest.mark.parametrize(
    ("status", "error"), [(404, ModelNotFound), (401, AuthError), (400, BadRequest)]
)
async def test_refusals_are_typed_and_not_retried(
    name: str, status: int, error: type[Exception]
) -> None:
    async with serve(name) as s:
        s.model.fail_next(Fault("status", status))
        with pytest.raises(error):
            await s.backend.chat(request())
        assert attempts(s) == 1


@every_wire
@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", 503),
        Fault("status", 429),
        Fault("status", 503, seconds=0.2),
        Fault("status", 429, seconds=0),
        Fault("status", 500),
        Fault("drop"),
        Fault("malformed"),
        Fault("error_line", message="out of memory"),
    ],
    ids=["503", "429", "503-retry-after", "429-retry-after", "500", "drop", "malformed", "error"],
)
async def test_transient_faults_are_retried_then_the_answer_comes_back(
    name: str, fault: Fault
) -> None:
    async with serve(name, retry_max_s=1.0 if fault.seconds else 0.01) as s:
        s.model.set_responder(lambda path, body: ANSWER)
        s.model.fail_next(fault)
        started = time.monotonic()
        c = await s.backend.chat(request())
        waited = time.monotonic() - started
    assert c.content == ANSWER and attempts(s) == 2
    assert c.logprobs is not None and "".join(t.token for t in c.logprobs).startswith(ANSWER)
    if fault.seconds:
        assert waited >= fault.seconds
