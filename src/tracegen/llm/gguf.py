"""What a GGUF model file says about itself, read from its header without loading it.

Follows the GGUF layout of ggml-org/ggml ``docs/gguf.md``: the magic ``GGUF``, a version, the
tensor and metadata counts, then typed key/value pairs (little-endian). Arrays (the vocabulary)
are skipped, not decoded, so reading a file of any size takes a fraction of a second.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tracegen.errors import ConfigError

MAGIC = b"GGUF"
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
KV_BYTES_PER_VALUE = 2
"""llama.cpp keeps its KV cache in f16 unless told otherwise."""


@dataclass(frozen=True)
class GgufInfo:
    """The metadata tracegen uses: family, size, trained context, chat template, KV shape."""

    path: Path
    size_bytes: int
    architecture: str
    name: str
    context_length: int
    chat_template: str | None
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int = 0
    """Tokens in the model's vocabulary (``tokenizer.ggml.tokens``); 0 when the file has none."""

    @property
    def kv_bytes_per_token(self) -> int:
        """KV cache bytes one token of context takes (keys and values, every layer)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * KV_BYTES_PER_VALUE


def read_gguf(path: Path) -> GgufInfo:
    """The metadata of the GGUF file at ``path``; `ConfigError` (one line) if it is missing,
    unreadable or not GGUF."""
    meta = read_arrays(path, frozenset())
    arch = str(meta.get("general.architecture", ""))

    def number(key: str, default: int = 0) -> int:
        value = meta.get(f"{arch}.{key}", default)
        return int(value) if isinstance(value, int | float) else default

    heads = number("attention.head_count", 1) or 1
    template = meta.get("tokenizer.chat_template")
    tokens = meta.get("tokenizer.ggml.tokens")
    return GgufInfo(
        path=path,
        size_bytes=path.stat().st_size,
        architecture=arch,
        name=str(meta.get("general.name", path.stem)),
        context_length=number("context_length"),
        chat_template=template if isinstance(template, str) and template.strip() else None,
        layers=number("block_count"),
        kv_heads=number("attention.head_count_kv", heads) or heads,
        head_dim=number("attention.key_length") or number("embedding_length") // heads,
        vocab=tokens.length
        if isinstance(tokens := meta.get("tokenizer.ggml.tokens"), _Array)
        else 0,
    )


class _Array(NamedTuple):
    """An array of the header, of which only the length is read."""

    length: int


def read_arrays(path: Path, keys: frozenset[str]) -> dict[str, Any]:
    """The header of the GGUF file at ``path`` with the arrays named in ``keys`` decoded
    (lists; the others by their length only); `ConfigError` (one line) if it is missing,
    unreadable or not GGUF."""
    try:
        with path.open("rb") as fh:
            if fh.read(4) != MAGIC:
                raise ConfigError(f"{path}: not a GGUF model file (give a .gguf file)")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _metadata(data, keys)
    except FileNotFoundError:
        raise ConfigError(f"{path}: model file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a GGUF model file") from None
    except (struct.error, ValueError, UnicodeDecodeError, KeyError):
        raise ConfigError(f"{path}: not a valid GGUF model file (truncated or damaged)") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None


def _metadata(data: mmap.mmap, arrays: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every scalar and string value of the header, by key (arrays by their length only,
    but those named in ``arrays``)."""
    _version, _tensors, count = struct.unpack_from("<IQQ", data, 4)
    offset = 24
    meta: dict[str, Any] = {}
    for _ in range(count):
        key, offset = _string(data, offset)
        (kind,) = struct.unpack_from("<I", data, offset)
        if kind == _ARRAY and key in arrays:
            meta[key], offset = _array(data, offset + 4)
        else:
            meta[key], offset = _value(data, offset + 4, kind)
    return meta


def _array(data: mmap.mmap, offset: int) -> tuple[list[Any], int]:
    item, count = struct.unpack_from("<IQ", data, offset)
    offset += 12
    if item == _STRING:
        values = []
        for _ in range(count):
            value, offset = _string(data, offset)
            values.append(value)
        return values, offset
    fmt = f"<{count}{_SCALARS[item]}"
    return list(struct.unpack_from(fmt, data, offset)), offset + struct.calcsize(fmt)


def _string(data: mmap.mmap, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", data, offset)
    start = offset + 8
    if start + length > len(data):
        raise ValueError("string runs past the end of the file")
    return data[start : start + length].decode("utf-8"), start + length


def _value(data: mmap.mmap, offset: int, kind: int) -> tuple[Any, int]:
    if kind == _STRING:
        return _string(data, offset)
    if kind == _ARRAY:
        item, count = struct.unpack_from("<IQ", data, offset)
        offset += 12
        if item == _STRING:
            for _ in range(count):
                (length,) = struct.unpack_from("<Q", data, offset)
                offset += 8 + length
        else:
            offset += struct.calcsize(_SCALARS[item]) * count
        return _Array(count), offset
    fmt = "<" + _SCALARS[kind]
    return struct.unpack_from(fmt, data, offset)[0], offset + struct.calcsize(fmt)
