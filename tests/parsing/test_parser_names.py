"""Every tool-call parser vLLM ships can be named to tracegen by vLLM's name for it, so a user
who passes their server's ``--tool-call-parser`` to ``--tool-parser`` is understood. When vLLM
adds a parser, add its name here: this test then fails until tracegen reads that format."""

from __future__ import annotations

from tracegen.parsing.tool_parsers import canonical_name, parser_names

# vllm-project/vllm vllm/entrypoints/openai/tool_parsers/__init__.py, _TOOL_PARSERS_TO_REGISTER
# (commit 00a1058bbb6a249ccd77437a88bf7f2438d02628), in its order.
VLLM_PARSERS = (
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "ernie45",
    "glm45",
    "granite-20b-fc",
    "granite",
    "hermes",
    "hunyuan_a13b",
    "internlm",
    "jamba",
    "kimi_k2",
    "llama3_json",
    "llama4_json",
    "llama4_pythonic",
    "longcat",
    "minimax_m2",
    "minimax",
    "mistral",
    "olmo3",
    "openai",
    "phi4_mini_json",
    "pythonic",
    "qwen3_coder",
    "qwen3_xml",
    "seed_oss",
    "step3",
    "xlam",
    "step_deepresearch",
)

# Names that arrived in later vLLM files beside those above (gigachat3:
# vllm/entrypoints/openai/tool_parsers/gigachat3_tool_parser.py; glm47, lfm2, granite4, apertus:
# vllm/tool_parsers/__init__.py)
VLLM_LATER = ("gigachat3", "glm47", "lfm2", "granite4", "apertus")


def test_every_vllm_parser_name_is_known_to_tracegen() -> None:
    missing = sorted(set(VLLM_PARSERS + VLLM_LATER) - set(parser_names()))
    assert missing == []


def test_each_vllm_name_resolves_to_a_parser() -> None:
    for name in VLLM_PARSERS + VLLM_LATER:
        assert canonical_name(name)
