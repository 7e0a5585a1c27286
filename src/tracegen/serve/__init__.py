"""``python -m tracegen.serve``: llama.cpp's HTTP server (from ``xllamacpp``, the ``local``
extra) on a packaged model or a GGUF file, for the live RL environments (Atropos' ``serve``,
OpenEnv, a TRL script) and any OpenAI-compatible client.

It is the server ``llama-server`` is, started in process: ``/v1/chat/completions`` and
``/v1/completions``, the sampled tokens' ids and logprobs (tracegen's ``openai`` backend
reads them), ``/tokenize`` and ``/detokenize``. It listens on 127.0.0.1 only (no API key: do
not expose it), prints its base URL on one line, and serves until interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from tracegen.errors import ConfigError, MissingExtraError
from tracegen.llm.local import default_threads
from tracegen.llm.packaged import DEFAULT_MODEL, ENGINE_INSTALL, LocalModel, find_model

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Served:
    """A running server: its base URL (``…/v1``), the name it serves the model under, and
    the `xllamacpp.Server` (it stops when this is dropped)."""

    url: str
    alias: str
    server: Any


def start(
    model: str = DEFAULT_MODEL,
    *,
    port: int = 0,
    alias: str | None = None,
    ctx: int = 4096,
    parallel: int = 1,
    threads: int | None = None,
) -> Served:
    """Start llama.cpp's server on ``model`` (a packaged model's name or a GGUF path) at
    127.0.0.1:``port`` (0: a free port)."""
    try:
        import xllamacpp
    except ImportError:
        raise MissingExtraError(
            f"llama.cpp's server comes with the local extra: {ENGINE_INSTALL}"
        ) from None
    found: LocalModel = find_model(model)
    params = xllamacpp.CommonParams()
    params.model.path = str(found.info.path)
    name = alias or model.rsplit("/", 1)[-1].removesuffix(".gguf")
    params.model_alias = {name}
    params.hostnames = [HOST]
    params.port = port
    params.n_ctx = ctx * parallel
    params.n_parallel = parallel
    params.warmup = False
    if found.template is not None:
        params.chat_template = found.template
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or default_threads()
    server = xllamacpp.Server(params)
    return Served(url=f"{server.listening_address}/v1", alias=name, server=server)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tracegen.serve",
        description="Serve a packaged model or a GGUF file with llama.cpp's server "
        "(OpenAI-compatible, on 127.0.0.1) until interrupted.",
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="packaged model name or .gguf")
    parser.add_argument("--port", type=int, default=8080, help="0: a free port (default 8080)")
    parser.add_argument("--alias", help="the model name clients ask for (default: the model's)")
    parser.add_argument("--ctx", type=int, default=4096, help="context tokens per slot")
    parser.add_argument("--parallel", type=int, default=1, help="requests decoded at once")
    parser.add_argument(
        "--threads", type=int, help="CPU threads (default: as tracegen run --backend local)"
    )
    args = parser.parse_args(argv)
    try:
        served = start(
            args.model,
            port=args.port,
            alias=args.alias,
            ctx=args.ctx,
            parallel=args.parallel,
            threads=args.threads,
        )
    except (ConfigError, MissingExtraError) as e:
        print(f"tracegen.serve: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"tracegen.serve: error: cannot start the server: {e}", file=sys.stderr)
        return 1
    print(f"{served.url} model {served.alias}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    del served
    return 0
