"""The registry of text tool-call parsers, and the public entry point `extract_tool_calls`.

Servers that parse tool calls themselves (vLLM, SGLang with ``--tool-call-parser``) hand back
structured ``tool_calls``; the embedded model, llama.cpp's server without its parser, Ollama's
raw mode and every exact-token path leave the calls in the text, written in the model family's
own format. Each parser reads one format (names as vLLM names its parsers; `ALIASES` keeps
older names working): the calls come back with their arguments as JSON objects, the text
left, and why each unreadable call failed. JSON arguments get the repairs of
`tracegen.parsing.toolcall.parse_tool_call`; a call that still cannot be read is reported,
never invented.
"""

from __future__ import annotations

from tracegen.errors import ConfigError
from tracegen.parsing.autodetect import Choice, detect_tool_parser
from tracegen.parsing.formats_channels import (
    cohere_command,
    inkling,
    kimi_k3,
    muse_glimmer,
    solar_open2,
)
from tracegen.parsing.formats_gemma import functiongemma, gemma4
from tracegen.parsing.formats_json import (
    apertus,
    deepseek,
    gigachat3,
    granite,
    granite_20b_fc,
    hermes,
    internlm,
    kimi_k2,
    llama3_json,
    longcat,
    minimax,
    mistral,
    openai,
    phi4_mini_json,
    xlam,
)
from tracegen.parsing.formats_markup import (
    deepseek_v4,
    deepseek_v32,
    dots,
    gigachat35,
    glm45,
    hy_v3,
    k2_horizon,
    minicpm5,
    minimax_m2,
    qwen3_coder,
    seed_oss,
    step3,
    step_deepresearch,
)
from tracegen.parsing.formats_nested import minimax_m3
from tracegen.parsing.formats_pythonic import lfm2, llama4_pythonic, olmo3, pythonic
from tracegen.parsing.textcalls import Parser, TextToolCalls, Tools
from tracegen.schema import ToolCall

AUTO = "auto"
PARSERS: dict[str, Parser] = {
    "hermes": hermes,
    "qwen3_coder": qwen3_coder,
    "deepseek_v3": deepseek,
    "deepseek_v31": deepseek,
    "deepseek_v32": deepseek_v32,
    "llama3_json": llama3_json,
    "pythonic": pythonic,
    "llama4_pythonic": llama4_pythonic,
    "mistral": mistral,
    "kimi_k2": kimi_k2,
    "glm45": glm45,
    "openai": openai,
    "granite": granite,
    "granite-20b-fc": granite_20b_fc,
    "phi4_mini_json": phi4_mini_json,
    "xlam": xlam,
    "minimax": minimax,
    "minimax_m2": minimax_m2,
    "internlm": internlm,
    "longcat": longcat,
    "gigachat3": gigachat3,
    "olmo3": olmo3,
    "lfm2": lfm2,
    "apertus": apertus,
    "seed_oss": seed_oss,
    "step3": step3,
    "step_deepresearch": step_deepresearch,
    "deepseek_v4": deepseek_v4,
    "kimi_k3": kimi_k3,
    "gemma4": gemma4,
    "functiongemma": functiongemma,
    "hy_v3": hy_v3,
    "minicpm5": minicpm5,
    "inkling": inkling,
    "cohere_command3": cohere_command,
    "solar_open2": solar_open2,
    "muse_glimmer": muse_glimmer,
    "dots": dots,
    "minimax_m3": minimax_m3,
    "gigachat35": gigachat35,
    "k2_horizon": k2_horizon,
}
"""Each family's parser, by vLLM's name for it."""

ALIASES: dict[str, str] = {
    "qwen": "hermes",
    "qwen25": "hermes",
    "qwen3_xml": "qwen3_coder",
    "llama3": "llama3_json",
    "llama4_json": "llama3_json",
    "deepseek_v3_1": "deepseek_v31",
    "glm47": "glm45",
    "gpt-oss": "openai",
    "harmony": "openai",
    "jamba": "minimax",
    "hunyuan_a13b": "minimax",
    "ernie45": "hermes",
    "granite4": "hermes",
    "poolside_v1": "glm45",
    "mimo": "qwen3_coder",
    "step3p5": "qwen3_coder",
    "ling3": "glm45",
    "cohere_command4": "cohere_command3",
    "hy_v4": "hy_v3",
    # SGLang's names (python/sglang/srt/function_call/function_call_parser.py)
    "deepseekv3": "deepseek_v3",
    "deepseekv31": "deepseek_v31",
    "deepseekv32": "deepseek_v32",
    "glm": "glm45",
    "minimax-m2": "minimax_m2",
    "hunyuan": "hy_v3",
    "interns1": "internlm",
    "apertus2509": "apertus",
    "deepseekv4": "deepseek_v4",
    "muse": "muse_glimmer",
    "minimax-m3": "minimax_m3",
    "spark25": "glm45",
    "trinity": "hermes",
}
"""Other names for the same formats: vLLM's names for a layout another family shares (Jamba
and Hunyuan-A13B write MiniMax-M1's ``<tool_calls>``, ERNIE 4.5 and Granite 4 write Hermes',
Poolside and Ling 3 write GLM-4.7's, MiMo and Step-3.5 write Qwen3-Coder's, Command 4 writes
Command A's, Hy4 Hy3's with its tags suffixed), SGLang's, tracegen's
earlier ones."""

TRY_ORDER: tuple[str, ...] = (
    "kimi_k2",
    "kimi_k3",
    "minimax_m3",
    "inkling",
    "gemma4",
    "functiongemma",
    "deepseek_v4",
    "gigachat35",
    "k2_horizon",
    "deepseek_v32",
    "deepseek_v31",
    "cohere_command3",
    "solar_open2",
    "muse_glimmer",
    "dots",
    "openai",
    "minimax_m2",
    "step3",
    "step_deepresearch",
    "seed_oss",
    "qwen3_coder",
    "minicpm5",
    "hy_v3",
    "glm45",
    "internlm",
    "longcat",
    "olmo3",
    "lfm2",
    "apertus",
    "hermes",
    "minimax",
    "mistral",
    "gigachat3",
    "phi4_mini_json",
    "granite",
    "granite-20b-fc",
    "llama4_pythonic",
    "llama3_json",
    "xlam",
)
"""The formats tried in turn when no parser is named: the most distinctive markers first."""


def parser_names() -> list[str]:
    """The names `get_parser` knows, aliases included."""
    return sorted({*PARSERS, *ALIASES})


def canonical_name(name: str) -> str:
    """The registry's name for ``name`` (an alias resolved); `ConfigError` when unknown."""
    name = ALIASES.get(name, name)
    if name not in PARSERS:
        known = ", ".join(parser_names())
        raise ConfigError(f"unknown tool parser {name!r} (known: auto, {known})")
    return name


def choose_parser(asked: str | None, template: str | None, model: str | None) -> Choice:
    """The parser a run uses: the family ``asked`` for, or (None or ``auto``) the one the chat
    ``template`` or the ``model``'s name names (`detect_tool_parser`)."""
    if asked and asked != AUTO:
        return Choice(canonical_name(asked), "--tool-parser")
    return detect_tool_parser(template, model)


def get_parser(name: str) -> Parser:
    """The parser called ``name``; an unknown name is a `ConfigError` listing the known ones."""
    return PARSERS[canonical_name(name)]


def parse_text_tool_calls(
    text: str, parser: str | None = None, tools: Tools = None
) -> TextToolCalls:
    """Every tool call written as text, read by ``parser``, or (None or ``auto``) by the first
    format that reads a call (the first that recognised a broken one when none does)."""
    if parser and parser != AUTO:
        return get_parser(parser)(text, tools) or TextToolCalls(text)
    broken: TextToolCalls | None = None
    for name in TRY_ORDER:
        found = PARSERS[name](text, tools)
        if found is None:
            continue
        if found.calls:
            return found
        broken = broken or found
    return broken or TextToolCalls(text)


def extract_tool_calls(
    text: str, parser: str | None = None, tools: Tools = None
) -> tuple[str, list[ToolCall]]:
    """The text left once the tool calls written in it are taken out, and those calls.

    ``parser`` names the model family's format (`parser_names`; None or ``auto`` tries each
    in turn); ``tools``, the request's OpenAI-style tool list, types the arguments of the
    formats that write each one as text (``qwen3_coder``, ``glm45``, ``minimax_m2``). Text
    with no call comes back unchanged with no calls; use `parse_text_tool_calls` to learn why
    a call could not be read.
    """
    found = parse_text_tool_calls(text, parser, tools)
    return found.text, found.calls
