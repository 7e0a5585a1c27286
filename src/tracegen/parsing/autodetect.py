"""``--tool-parser auto``: the family's parser, from the chat template's markers or the model's
name.

The chat template decides when it is known (the embedded model's GGUF carries it): the first
marker of `TEMPLATE_MARKERS` found in it names the parser. Otherwise the model's name is
matched against `NAME_PATTERNS`. When neither says, no parser is chosen and every format is
tried in turn (`tracegen.parsing.tool_parsers.TRY_ORDER`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TEMPLATE_MARKERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("<|tool_calls_section_begin|>",), "kimi_k2"),
    (("<|im_system|>tool_declare",), "kimi_k2"),
    (("<|open|>", "<|sep|>"), "kimi_k3"),
    (("<|content_invoke_tool_json|>",), "inkling"),
    (("<|tool_call>",), "gemma4"),
    (("<start_function_call>",), "functiongemma"),
    (("｜DSML｜tool_calls",), "deepseek_v4"),
    (("｜GCML｜",), "gigachat35"),
    (("<ifm|tool_call>",), "k2_horizon"),
    (("<|START_ACTION|>",), "cohere_command3"),
    (("<|tool_call:start|>",), "solar_open2"),
    (("<atem:function_calls>",), "muse_glimmer"),
    (("<dots_function_call>",), "dots"),
    (("｜DSML｜",), "deepseek_v32"),
    (("tool▁calls▁begin", "```json"), "deepseek_v3"),
    (("tool▁calls▁begin",), "deepseek_v31"),
    (("<|channel|>", "<|message|>"), "openai"),
    (("steptml:invoke", "tool_calls_begin"), "step3"),
    (("<steptml:toolcall>",), "step_deepresearch"),
    (("<seed:tool_call>",), "seed_oss"),
    (("]<]minimax[>[",), "minimax_m3"),
    (("<minimax:tool_call>",), "minimax_m2"),
    (("<invoke name=", "<parameter name="), "minimax_m2"),
    (("<|action_start|><|plugin|>",), "internlm"),
    (("<longcat_tool_call>",), "longcat"),
    (("<function_calls>",), "olmo3"),
    (("<|tool_call_start|>",), "lfm2"),
    (("<|tools_prefix|>",), "apertus"),
    (("function call<|role_sep|>",), "gigachat3"),
    (("<|function_call|>",), "gigachat3"),
    (("<tool_sep>",), "hy_v3"),
    (("<function name=", "<param name="), "minicpm5"),
    (("<tool_calls>",), "minimax"),
    (("<arg_key>",), "glm45"),
    (("<function=", "<parameter="), "qwen3_coder"),
    (("[TOOL_CALLS]",), "mistral"),
    (("functools[",), "phi4_mini_json"),
    (("<|/tool_call|>",), "phi4_mini_json"),
    (("<function_call>",), "granite-20b-fc"),
    (("<|tool_call|>",), "granite"),
    (("<|header_start|>", "[func_name1("), "llama4_pythonic"),
    (("<|python_start|>",), "llama4_pythonic"),
    (("[func_name1(",), "pythonic"),
    (("<|python_tag|>",), "llama3_json"),
    (("<|start_header_id|>", '"parameters"'), "llama3_json"),
    (("<|header_start|>", '"parameters"'), "llama3_json"),
    (("<tool_call>",), "hermes"),
    (('[{"name": "tool_call_name", "arguments"',), "xlam"),
)
"""Markers a chat template writes tool calls with (all of a row's must be present), most
distinctive first, and the parser they name."""

NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"kimi[-_.]?k2", "kimi_k2"),
    (r"kimi[-_.]?k3", "kimi_k3"),
    (r"k2[-_.]?(?:horizon|v3)", "k2_horizon"),
    (r"deepseek[-_.]?v4", "deepseek_v4"),
    (r"function[-_.]?gemma", "functiongemma"),
    (r"gemma[-_.]?4", "gemma4"),
    (r"(?<![a-z])hy[-_.]?v?3(?!\d)", "hy_v3"),
    (r"(?<![a-z])hy[-_.]?v?4(?!\d)", "hy_v4"),
    (r"c4ai[-_.]?command|command[-_.]?a(?![a-z])|command[-_.]?r7b", "cohere_command3"),
    (r"solar[-_.]?open", "solar_open2"),
    (r"muse[-_.]?glimmer", "muse_glimmer"),
    (r"(?<![a-z])dots[-_.]", "dots"),
    (r"(?<![a-z])ling[-_.]?3", "ling3"),
    (r"minicpm[-_.]?5", "minicpm5"),
    (r"inkling", "inkling"),
    (r"poolside", "poolside_v1"),
    (r"(?<![a-z])mimo(?![a-z])", "mimo"),
    (r"step[-_.]?3(?:p5|\.5|[-_]5)", "step3p5"),
    (r"deepseek[-_.]?v3[-_.]?2(?![-_.]?exp)", "deepseek_v32"),
    (r"deepseek[-_.]?(?:v3[-_.]?[12]|v3\.[12]|r1[-_.]?0528|chat[-_.]?v3\.1)", "deepseek_v31"),
    (r"deepseek[-_.]?(?:v3|r1)", "deepseek_v3"),
    (r"gpt[-_.]?oss", "openai"),
    (r"minimax[-_.]?m3", "minimax_m3"),
    (r"minimax[-_.]?m2", "minimax_m2"),
    (r"minimax", "minimax"),
    (r"glm[-_.]?4\.?[567]|glm[-_.]?4[-_.]?moe", "glm45"),
    (r"qwen3[-_.]?coder|qwen3\.5", "qwen3_coder"),
    (r"xlam", "xlam"),
    (r"internlm|intern[-_.]?s1", "internlm"),
    (r"jamba", "jamba"),
    (r"hunyuan", "hunyuan_a13b"),
    (r"seed[-_.]?oss", "seed_oss"),
    (r"step[-_.]?3(?![-_.]?5|\.5)", "step3"),
    (r"ernie[-_.]?4\.?5", "ernie45"),
    (r"longcat", "longcat"),
    (r"olmo[-_.]?3", "olmo3"),
    (r"lfm[-_.]?2", "lfm2"),
    (r"apertus", "apertus"),
    (r"gigachat[-_.]?3[-_.]?5", "gigachat35"),
    (r"gigachat[-_.]?3", "gigachat3"),
    (r"toolace", "pythonic"),
    (r"phi[-_.]?4[-_.]?mini", "phi4_mini_json"),
    (r"granite[-_.]?20b[-_.]?function", "granite-20b-fc"),
    (r"granite[-_.]?4", "granite4"),
    (r"granite", "granite"),
    (r"(?:mistral|mixtral|ministral|devstral|magistral|codestral|pixtral)", "mistral"),
    (r"llama[-_.]?4", "llama4_pythonic"),
    (r"llama[-_.]?3", "llama3_json"),
    (r"qwen|qwq|hermes|nous", "hermes"),
)
"""Model name patterns (searched case-insensitively) and the parser they name (maybe by an
alias: ``jamba`` is read as ``minimax``)."""


@dataclass(frozen=True)
class Choice:
    """The parser ``auto`` chose (None: every format in turn) and why, for people."""

    parser: str | None
    reason: str

    def describe(self) -> str:
        """``hermes (the chat template writes <tool_call>)``."""
        return f"{self.parser or 'every format in turn'} ({self.reason})"


def detect_tool_parser(template: str | None = None, model: str | None = None) -> Choice:
    """The parser for a model with chat ``template`` (when known) called ``model``."""
    if template:
        for markers, parser in TEMPLATE_MARKERS:
            if all(m in template for m in markers):
                return Choice(parser, f"the chat template writes {markers[0]}")
    if model:
        for pattern, parser in NAME_PATTERNS:
            if re.search(pattern, model, re.IGNORECASE):
                return Choice(parser, f"the model's name matches {pattern!r}")
    if template:
        return Choice(None, "no tool-call marker in the chat template")
    return Choice(None, "neither the chat template nor the model's name names a family")
