"""A Hugging Face tokenizer directory made from a GGUF file's own vocabulary, merges and chat
template, for what reads a tokenizer with ``AutoTokenizer.from_pretrained`` only (Atropos'
``--env.tokenizer_name``), offline.

Made for byte-level BPE vocabularies (``tokenizer.ggml.model`` ``gpt2``: SmolLM2, Qwen,
Llama 3): the tokens, the merges, the special tokens (token type 3) and a byte-level
pre-tokenizer and decoder. Decoding is exact; encoding may split some text differently from
the model's own pre-tokenizer, which the GGUF names but does not define — so tracegen itself
tokenizes with llama.cpp (`tracegen.export.tokens.tokenizer`), and this copy is used to
decode. ``transformers`` can do the same with ``gguf_file=`` once the ``gguf`` package is
installed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson

from tracegen.errors import ConfigError
from tracegen.llm.gguf import read_arrays

VOCABULARY = frozenset(
    {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"}
)


def hf_tokenizer(gguf: Path, dest: Path) -> Path:
    """Write the tokenizer of ``gguf`` to the directory ``dest`` (``tokenizer.json`` and
    ``tokenizer_config.json``); `ConfigError` for a vocabulary that is not byte-level BPE."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    meta = read_arrays(gguf, VOCABULARY)
    if meta.get("tokenizer.ggml.model") != "gpt2" or "tokenizer.ggml.merges" not in meta:
        raise ConfigError(
            f"{gguf}: its vocabulary is not byte-level BPE ({meta.get('tokenizer.ggml.model')}); "
            "give a Hugging Face tokenizer directory"
        )
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type") or []
    tok.add_special_tokens([t for t, kind in zip(tokens, types, strict=False) if kind == 3])
    dest.mkdir(parents=True, exist_ok=True)
    tok.save(str(dest / "tokenizer.json"))
    eos = tokens[int(meta["tokenizer.ggml.eos_token_id"])]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": meta.get("tokenizer.chat_template"),
        "eos_token": eos,
        "pad_token": eos,
    }
    (dest / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return dest


def cached_hf_tokenizer(gguf: Path) -> Path:
    """`hf_tokenizer` of ``gguf`` in tracegen's cache (``$XDG_CACHE_HOME/tracegen``), made
    once per file (by path, size and modification time)."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracegen"
    dest = root / "tokenizers" / f"{gguf.stem}-{key.hexdigest()[:16]}"
    if not (dest / "tokenizer_config.json").is_file():
        hf_tokenizer(gguf, dest)
    return dest
