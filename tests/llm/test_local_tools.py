"""The embedded model gets ``tools=`` through its chat template (llama.cpp's Jinja renderer,
xllamacpp 2026.10, where ``use_jinja`` is on by default), as the model was trained to see
them: not as instructions tracegen writes into the system prompt."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tracegen.errors import TracegenError
from tracegen.llm.base import ChatRequest, SamplingOptions
from tracegen.llm.local import LocalBackend
from tracegen.llm.packaged import DEFAULT_MODEL, find_model
from tracegen.modes.native_tools import PYTHON_TOOL
from tracegen.schema import ChatMessage

pytestmark = pytest.mark.slow

HERMES_LIKE = (
    "{%- if tools %}<|im_start|>system\n<tools>\n{% for t in tools %}{{ t | tojson }}\n"
    "{% endfor %}</tools><|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A chat template that shows the tools, in the layout of Qwen2.5's (``<tools>…</tools>``)."""


def test_tools_are_rendered_by_the_models_chat_template(tmp_path: Path) -> None:
    template = tmp_path / "hermes.jinja"
    template.write_text(HERMES_LIKE)
    try:
        backend = LocalBackend(find_model(DEFAULT_MODEL, template), context_tokens=1024, slots=1)
    except TracegenError as e:
        pytest.skip(f"the local backend is not installed: {e}")

    async def prompt_with_tools() -> str:
        await backend.open()
        try:
            request = ChatRequest(
                messages=[ChatMessage(role="user", content="Run print(1).")],
                tools=[PYTHON_TOOL],
                options=SamplingOptions(max_tokens=1, temperature=0.0),
            )
            completion = await backend.chat(request)
            return await backend.detokenize(completion.prompt_ids or [])
        finally:
            await backend.aclose()

    prompt = asyncio.run(prompt_with_tools())
    assert "<tools>" in prompt and '"name":"python"' in prompt.replace(" ", "")
    assert prompt.rstrip().endswith("<|im_start|>assistant")
