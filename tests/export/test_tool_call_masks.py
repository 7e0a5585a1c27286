"""Token exports of native-tools traces: the tool-call syntax the template writes for the
model's family is trained on (mask 1), the tool response tracegen fed back never is."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support.token_traces import make_tokenizer
from tracegen.export.tokens.sequences import token_episode
from tracegen.export.tokens.tokenizer import load_tokenizer
from tracegen.schema import ChatMessage, Step, ToolCall, ToolFunction, Trace

QWEN3_LIKE = (
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|im_start|>assistant\n<think>\n\n</think>\n\n"
    "{{ m.content }}{% for c in m.tool_calls or [] %}\n<tool_call>\n"
    '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}'
    "\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen3's layout: an empty ``<think>`` block before the content, calls after it, tool
responses in a user turn (Qwen/Qwen3-8B tokenizer_config.json, abridged)."""

CODE = "print(add(1, 2))"
RESPONSE = orjson.dumps({"status": "ok", "stdout": "3\n"}).decode()


def native_trace() -> Trace:
    call = ToolCall(id="call_0", function=ToolFunction(name="python", arguments={"code": CODE}))
    messages = [
        ChatMessage(role="system", content="You solve coding problems."),
        ChatMessage(role="user", content="Write add."),
        ChatMessage(role="assistant", content="Let me try it.", tool_calls=[call]),
        ChatMessage(role="tool", content=RESPONSE, tool_name="python"),
        ChatMessage(role="assistant", content="def add(a, b):\n    return a + b"),
    ]
    steps = [
        Step(kind="text", text="Let me try it.", message_index=2),
        Step(kind="tool_call", text='{"name": "python"}', message_index=2),
        Step(kind="tool_response", text=RESPONSE, message_index=3, source="system"),
    ]
    return Trace(
        id="t", problem_id="add", mode="native-tools", model="m", messages=messages, steps=steps
    )


def test_the_templates_tool_call_is_trained_and_the_tool_response_is_not(
    tmp_path: Path,
) -> None:
    tokenizer = load_tokenizer(make_tokenizer(tmp_path / "tok", QWEN3_LIKE))
    episode = token_episode(native_trace(), tokenizer, require_exact=False)
    trained = [
        tokenizer.decode([i for i, m in zip(s.completion_ids, s.env_mask, strict=True) if m])
        for s in episode.sequences
    ]
    first = trained[0]
    assert first.startswith("Let me try it.") and '<tool_call>\n{"name": "python"' in first
    assert '"arguments": {"code": "print(add(1, 2))"}' in first
    assert first.endswith("</tool_call><|im_end|>")
    assert not any("<tool_response>" in t for t in trained)
    prompts = [tokenizer.decode(s.prompt_ids) for s in episode.sequences]
    assert "<tool_response>" in prompts[-1]
