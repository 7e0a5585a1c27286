"""Turning model text into structure: tagged steps, tool-call JSON, text-emitted tool calls.

`extract_tool_calls` (``text, parser=NAME``) is the public entry point for tool calls a model
wrote as text in its family's format (docs/modes.md, Tool calls from every model family).

Pure functions, no I/O.
"""

from tracegen.parsing.segment import segment, strip_system_tags
from tracegen.parsing.textcalls import TextToolCalls
from tracegen.parsing.tool_parsers import (
    extract_tool_calls,
    get_parser,
    parse_text_tool_calls,
    parser_names,
)
from tracegen.parsing.toolcall import (
    ParsedToolCall,
    ToolCallMatch,
    ToolCallParseError,
    find_tool_call,
    parse_tool_call,
)

__all__ = [
    "ParsedToolCall",
    "TextToolCalls",
    "ToolCallMatch",
    "ToolCallParseError",
    "extract_tool_calls",
    "find_tool_call",
    "get_parser",
    "parse_text_tool_calls",
    "parse_tool_call",
    "parser_names",
    "segment",
    "strip_system_tags",
]
