"""Every tool-call parser vLLM and SGLang ship can be named to tracegen by their name for it, so
a user who passes their server's ``--tool-call-parser`` to ``--tool-parser`` is understood. When
vLLM or SGLang adds a parser, add its name here: this test then fails until tracegen reads that
format."""

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

# vllm-project/vllm vllm/tool_parsers/__init__.py, _TOOL_PARSERS_TO_REGISTER (commit
# 0064cc9cb1ae57b1308015d48a57462fa27a68f2): the names added since those above.
VLLM_NEWER = (
    "deepseek_v4",
    "cohere_command3",
    "cohere_command4",
    "poolside_v1",
    "hy_v3",
    "kimi_k3",
    "mimo",
    "minimax_m3",
    "minicpm5",
    "step3p5",
    "inkling",
    "functiongemma",
    "gemma4",
    "solar_open2",
)

# vllm-project/vllm vllm/frontend/processing/tool_parsers/__init__.py (commit
# 761f197523b7a355e0fff3e76d6d2fda81987ad6), where the registry moved: its names beyond those.
VLLM_NEWEST = ("dots", "ling3", "hy_v4", "muse_glimmer")


VLLM_ALL = VLLM_PARSERS + VLLM_LATER + VLLM_NEWER + VLLM_NEWEST


# sgl-project/sglang python/sglang/srt/function_call/function_call_parser.py,
# FunctionCallParser.ToolCallParserEnum (commit 00828e568a0030e197c825dfa20f5a180b143d04).
SGLANG_PARSERS = (
    "apertus2509",
    "cohere_command4",
    "deepseekv3",
    "deepseekv31",
    "deepseekv32",
    "deepseekv4",
    "dots",
    "glm",
    "glm45",
    "glm47",
    "gpt-oss",
    "k2_horizon",
    "kimi_k2",
    "kimi_k3",
    "lfm2",
    "ling3",
    "llama3",
    "mimo",
    "minicpm5",
    "mistral",
    "muse",
    "poolside_v1",
    "pythonic",
    "qwen",
    "qwen25",
    "qwen3_coder",
    "spark25",
    "step3",
    "step3p5",
    "minimax-m2",
    "minimax-m3",
    "trinity",
    "interns1",
    "hermes",
    "hunyuan",
    "gigachat3",
    "gigachat35",
    "gemma4",
    "inkling",
)


def test_every_vllm_parser_name_is_known_to_tracegen() -> None:
    missing = sorted(set(VLLM_ALL) - set(parser_names()))
    assert missing == []


def test_each_vllm_name_resolves_to_a_parser() -> None:
    for name in VLLM_ALL:
        assert canonical_name(name)


def test_every_sglang_parser_name_is_known_to_tracegen() -> None:
    missing = sorted(set(SGLANG_PARSERS) - set(parser_names()))
    assert missing == []
