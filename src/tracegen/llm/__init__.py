"""Model backends: one wire protocol each, neutral typed completions out, no knowledge of traces.

`tracegen.llm.factory` is the only module that names a backend class."""

from tracegen.llm.base import (
    Backend,
    Capabilities,
    ChatRequest,
    Completion,
    HostBackend,
    SamplingOptions,
)

__all__ = [
    "Backend",
    "Capabilities",
    "ChatRequest",
    "Completion",
    "HostBackend",
    "SamplingOptions",
]
