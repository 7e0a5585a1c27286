"""Model backends: one wire protocol each, typed completions out, no knowledge of traces."""

from tracegen.llm.base import Backend, ChatOptions, ChatRequest, Completion

__all__ = ["Backend", "ChatOptions", "ChatRequest", "Completion"]
