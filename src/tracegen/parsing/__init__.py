"""Turning model text into structure: tagged steps, tool-call JSON, text-emitted tool calls.

Pure functions, no I/O.
"""

from tracegen.parsing.segment import segment, strip_system_tags
from tracegen.parsing.tool_parsers import extract_tool_calls, get_parser, parser_names
from tracegen.parsing.toolcall import (
    ParsedToolCall,
    ToolCallMatch,
    ToolCallParseError,
    find_tool_call,
    parse_tool_call,
)

__all__ = [
    "ParsedToolCall",
    "ToolCallMatch",
    "ToolCallParseError",
    "extract_tool_calls",
    "find_tool_call",
    "get_parser",
    "parse_tool_call",
    "parser_names",
    "segment",
    "strip_system_tags",
]
