"""Small GGUF files for tests: a header with the metadata tracegen reads, and no tensors."""

from __future__ import annotations

import struct
from pathlib import Path

_STRING, _UINT32, _ARRAY = 8, 4, 9


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(
    path: Path, *, architecture: str = "llama", chat_template: str | None = None, layers: int = 2
) -> Path:
    """A GGUF header of ``architecture`` (a vocabulary array too, which readers must skip)."""
    values: list[tuple[str, int, bytes]] = [
        ("general.architecture", _STRING, _string(architecture)),
        ("general.name", _STRING, _string("Tiny Test")),
        (f"{architecture}.context_length", _UINT32, struct.pack("<I", 2048)),
        (f"{architecture}.block_count", _UINT32, struct.pack("<I", layers)),
        (f"{architecture}.embedding_length", _UINT32, struct.pack("<I", 64)),
        (f"{architecture}.attention.head_count", _UINT32, struct.pack("<I", 4)),
        (f"{architecture}.attention.head_count_kv", _UINT32, struct.pack("<I", 2)),
        (
            "tokenizer.ggml.tokens",
            _ARRAY,
            struct.pack("<IQ", _STRING, 3) + b"".join(_string(t) for t in ("<s>", "a", "b")),
        ),
    ]
    if chat_template is not None:
        values.append(("tokenizer.chat_template", _STRING, _string(chat_template)))
    body = b"".join(_string(k) + struct.pack("<I", kind) + v for k, kind, v in values)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(values)) + body)
    return path
