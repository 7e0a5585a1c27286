"""The backend contract, held by the embedded model (SmolLM2-135M-Instruct, really run):
streaming, logprobs with token ids, stop sequences, max_tokens, seeds, continuation of a
partial assistant message, constrained decoding, typed errors. Written so it can be folded
into a contract shared by every backend (the fixture gives the backend under test)."""

from __future__ import annotations

import pytest

from tracegen.errors import BadRequest
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.grammar import Grammar, alt, ref
from tracegen.llm.local import LocalBackend
from tracegen.schema import ChatMessage

pytestmark = pytest.mark.slow

COUNT = [ChatMessage(role="user", content="Count from 1 to 30, separated by commas.")]


def request(messages: list[ChatMessage] = COUNT, **options: object) -> ChatRequest:
    sampling = SamplingOptions(**{"max_tokens": 24, "temperature": 0.0, **options})
    return ChatRequest(messages=messages, options=sampling, top_logprobs=3)


async def test_a_completion_carries_every_token_with_its_id_and_logprob(
    local_model: LocalBackend,
) -> None:
    c = await local_model.chat(request())
    assert c.content and c.prompt_ids and c.completion_ids and c.logprobs
    assert [t.id for t in c.logprobs] == c.completion_ids
    assert c.completion_tokens == len(c.completion_ids)
    assert c.prompt_tokens == len(c.prompt_ids)
    assert all(len(t.top_logprobs) <= 3 and t.logprob <= 0 for t in c.logprobs)
    assert b"".join(bytes(t.bytes or []) for t in c.logprobs).decode() == c.content
    assert (await local_model.detokenize(c.completion_ids)).startswith(c.content)


async def test_a_stop_string_cuts_the_text_but_its_token_is_kept(
    local_model: LocalBackend,
) -> None:
    c = await local_model.chat(request(stop=["5"]))
    assert c.finish_reason == "stop" and "5" not in c.content
    text = await local_model.detokenize(c.completion_ids)
    assert text.startswith(c.content + "5")
    assert len(c.logprobs or []) == len(c.completion_ids)


async def test_max_tokens_ends_the_reply_with_length(local_model: LocalBackend) -> None:
    c = await local_model.chat(request(max_tokens=3))
    assert c.finish_reason == "length" and len(c.completion_ids or []) == 3


async def test_the_same_seed_samples_the_same_tokens(local_model: LocalBackend) -> None:
    first = await local_model.chat(request(temperature=1.0, seed=7))
    again = await local_model.chat(request(temperature=1.0, seed=7))
    assert first.completion_ids == again.completion_ids


async def test_a_partial_assistant_message_is_continued_with_no_end_of_turn_between(
    local_model: LocalBackend,
) -> None:
    partial = "<think>I add the two numbers:"
    messages = [*COUNT, ChatMessage(role="assistant", content=partial)]
    c = await local_model.continue_message(request(messages), "prefill")
    assert c.continuation == "prefill"
    (end_of_turn,) = await local_model.tokenize("<|im_end|>")
    (turn_start,) = await local_model.tokenize("<|im_start|>")
    assert c.prompt_ids is not None
    last_turn = len(c.prompt_ids) - 1 - c.prompt_ids[::-1].index(turn_start)
    assert end_of_turn not in c.prompt_ids[last_turn:]
    assert (await local_model.detokenize(c.prompt_ids[last_turn:])).endswith(partial)
    assert c.prompt_ids.count(end_of_turn) == 2  # the system and user turns are closed


async def test_a_grammar_constrains_the_reply(local_model: LocalBackend) -> None:
    grammar = Grammar("yes-no", {"root": alt("yes", "no")})
    c = await local_model.chat(request(grammar=grammar, temperature=1.0, seed=3))
    assert c.content in ("yes", "no")


async def test_a_broken_grammar_is_a_bad_request(local_model: LocalBackend) -> None:
    with pytest.raises(BadRequest, match="grammar"):
        await local_model.chat(request(grammar=Grammar("broken", {"root": ref("missing")})))


async def test_the_next_prompt_starts_with_the_ids_the_model_sampled(
    local_model: LocalBackend,
) -> None:
    """The first prompt ends inside a word, which the model completes: tokenizing the text
    again would merge the word's pieces, but the next request goes on from the very ids the
    model was given and sampled (so the episode exports as one sequence)."""
    opened = [*COUNT, ChatMessage(role="assistant", content="Sure, I will wri")]
    first = await local_model.continue_message(request(opened, max_tokens=4), "raw")
    assert first.finish_reason == "length"
    assert first.prompt_ids is not None and first.completion_ids is not None
    answer = f"Sure, I will wri{first.content}\n<tool_response>\n1, 2, 3\n</tool_response>\n"
    then = await local_model.continue_message(
        request([*COUNT, ChatMessage(role="assistant", content=answer)]), "raw"
    )
    sent = first.prompt_ids + first.completion_ids
    assert then.prompt_ids is not None and then.prompt_ids[: len(sent)] == sent
    fresh = await local_model.prompt_ids([*COUNT, ChatMessage(role="assistant", content=answer)])
    assert await local_model.detokenize(then.prompt_ids) == await local_model.detokenize(fresh)
