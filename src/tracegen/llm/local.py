"""The embedded backend: llama.cpp run in this process through ``xllamacpp``, a GGUF model.

Every request is exact token-in/token-out. The conversation is rendered with the model's chat
template and tokenized by llama.cpp itself; those ids are the prompt the model is given
(`Completion.prompt_ids`), and every sampled token comes back with its id and logprob
(`Completion.completion_ids`, `TokenLogprob.id`); an id outside the model's vocabulary (the
GGUF file's) is an error (`check_ids`), never data. A prompt whose text goes on from an earlier
request's prompt and completion starts with their very ids (`tracegen.llm.sequences`). A partial
assistant message last in the conversation is rendered open (no end-of-turn token) and
continued: ``raw`` continuation, which ``prefill`` is too here. Stop sequences are applied
here, not by llama.cpp (whose OpenAI-style answers drop the token holding a stop string): the
text is cut before the stop string, the ids keep every sampled token. Logprobs are llama.cpp's
defaults: the model's own log-softmax over the whole vocabulary, before temperature, top-k/top-p
and any grammar.

Requests run in a pool of worker threads, one per llama.cpp slot (``n_parallel``), so the
event loop, the sandbox and the progress display keep running; llama.cpp batches the slots'
tokens together and releases the GIL in every native call. Rendering and tokenizing go
through the HTTP listener every ``xllamacpp.Server`` starts: it is bound to a Unix socket in
a private (0700) temporary folder and requires a random key, so generated code can reach
neither (bwrap hides the host's /tmp; under ``--sandbox rlimit`` as a normal user the code
runs as you, and only the key stands in its way). Generation itself is in process.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import httpx

from tracegen.cores import affinity_cores, busy_cores, usable_cores
from tracegen.errors import BackendError, BadRequest, ConfigError, ServerError
from tracegen.llm.base import (
    Capabilities,
    ChatRequest,
    Completion,
    ContinueChoice,
    FinishReason,
    ServerInfo,
    check_ids,
    logprobs_kind,
    pick_continuation,
    token_logprobs,
)
from tracegen.llm.packaged import LocalModel, require_engine
from tracegen.llm.sequences import Sequences
from tracegen.schema import ChatMessage, TokenLogprob

HOST = "local"
MEMORY_HEADROOM = 0.9
"""Share of the available memory the model and its KV cache may take."""


class Engine(Protocol):
    """What the backend calls on llama.cpp (an ``xllamacpp.Server``): one completion from token
    ids, streamed to ``on_chunk`` (which returns True to stop it) or returned whole; a bad
    request raises `ValueError`."""

    def handle_completions(
        self, body: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool] | None = None
    ) -> Any: ...


BUSY_SHARE = 0.5
"""A core counts as busy once other work holds this share of it (`idle_cores`)."""
MEASURED = "see docs/performance.md"
"""Where the figures behind the default stand (``benchmarks/threads.py``): on a quiet 2-core
machine 2 threads ran the first-run workload fastest, by tokens/s and traces/s, the embedded
model and llama.cpp's own server alike; with other work on the cores, 1 thread did, by up to
9 times: a thread of llama.cpp waits for the others at every token, so one descheduled by
anything else running stalls them all."""


def idle_cores(cores: int, busy: float) -> int:
    """Of ``cores``, how many are idle when other work keeps ``busy`` of them busy (at least
    1): a core counts as busy once other work holds `BUSY_SHARE` of it."""
    taken = math.floor(max(0.0, busy) + 1 - BUSY_SHARE)
    return max(1, min(cores, cores - taken))


def choose_threads(
    cores: int | None = None, busy: float | None = None, allowed: int | None = None
) -> tuple[int, str]:
    """llama.cpp threads when ``--threads`` is not given, and the words that say why: one per
    core idle when the model loads (`idle_cores` of the ``cores`` it may be scheduled on, of
    which other work keeps ``busy`` busy), at most the cores' worth of CPU it is ``allowed``
    (a cgroup's CPU quota): the count measured best on quiet and busy machines alike
    (`MEASURED`)."""
    cores = cores or affinity_cores()
    allowed = allowed or usable_cores()
    busy = round(busy_cores() if busy is None else busy, 1)
    threads = min(idle_cores(cores, busy), allowed)
    why = f"one per idle core, {busy:.1f} of {_cores(cores)} busy"
    if allowed < cores:
        why += f", at most {allowed} by the CPU quota"
    return threads, f"{_threads(threads)}: {why}, {MEASURED}"


def default_threads() -> int:
    """llama.cpp threads when not set (`choose_threads`)."""
    return choose_threads()[0]


def _threads(n: int) -> str:
    return f"{n} thread" if n == 1 else f"{n} threads"


def _cores(n: int) -> str:
    return f"{n} core" if n == 1 else f"{n} cores"


def check_fits(model: LocalModel, context_tokens: int, slots: int) -> None:
    """`ConfigError` when the model and a KV cache of ``context_tokens`` per slot cannot fit
    in the memory available now."""
    kv = model.info.kv_bytes_per_token * context_tokens * slots
    need = model.info.size_bytes + kv
    available = _available_memory()
    if available is not None and need > MEMORY_HEADROOM * available:
        raise ConfigError(
            f"a context of {context_tokens} tokens × {slots} slot(s) needs {_gb(kv)} of KV "
            f"cache for {model.name}, more than the {_gb(available)} of memory available: "
            "lower --num-ctx or --concurrency"
        )


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


class LocalBackend:
    """One GGUF model in this process; see the module docstring. Both continuation methods
    are the same here: the conversation is rendered with the partial message left open."""

    server_name = "the local backend"

    capabilities = Capabilities(
        logprobs=True,
        token_ids=True,
        continuation=("raw", "prefill"),
        tools=False,
        thinking=False,
        grammar=True,
        logprobs_kind="raw",
        processed_logprobs=True,
    )

    def __init__(
        self, model: LocalModel, *, context_tokens: int, slots: int, threads: int | None = None
    ) -> None:
        require_engine()
        check_fits(model, context_tokens, slots)
        self.host = HOST
        self.model = model.name
        self.local = model
        self.context_tokens = context_tokens
        self.slots = slots
        if threads:
            self.threads, self.threads_why = threads, f"{_threads(threads)} (--threads)"
        else:
            self.threads, self.threads_why = choose_threads()
        self.load_s = 0.0
        self._server: Engine | None = None
        self._http: httpx.Client | None = None
        self._folder: str | None = None
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="tracegen-llama")
        self._cancels: set[threading.Event] = set()
        self._sequences = Sequences()

    def __repr__(self) -> str:
        return f"LocalBackend(model={self.model!r}, slots={self.slots}, threads={self.threads})"

    def describe(self, *, constrained: bool) -> str:
        """The line that says what is loaded and how requests run."""
        m = self.local
        grammar = "constrained to the mode's grammar" if constrained else "unconstrained"
        return (
            f"local: loading {m.name} ({m.summary}; chat template from {m.template_source}) · "
            f"{self.slots} slot(s) of {self.context_tokens} tokens · "
            f"{self.threads_why} · {grammar}"
        )

    # ------------------------------------------------------------ loading

    async def open(self) -> None:
        """Load the model (once) in a worker thread."""
        if self._server is not None:
            return
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._load)
        finally:
            # llama.cpp's server installs its own SIGINT/SIGTERM handlers: put Python's back.
            if threading.current_thread() is threading.main_thread():
                for sig, handler in handlers.items():
                    if handler is not None:
                        signal.signal(sig, handler)

    def _load(self) -> None:
        started = time.perf_counter()
        self._server, self._http = self._start_engine()
        self.load_s = time.perf_counter() - started

    def _start_engine(self) -> tuple[Engine, httpx.Client]:
        """llama.cpp's server code in process, and a client of its private listener."""
        import xllamacpp

        self._folder = tempfile.mkdtemp(prefix="tracegen-llama-")
        socket_path = os.path.join(self._folder, "llama.sock")
        key = secrets.token_urlsafe(32)
        p = xllamacpp.CommonParams()
        p.model.path = str(self.local.info.path)
        p.n_ctx = self.context_tokens * self.slots
        p.n_parallel = self.slots
        p.kv_unified = False
        p.fit_params = False
        p.cpuparams.n_threads = self.threads
        p.cpuparams_batch.n_threads = self.threads
        p.verbosity = -1
        p.hostnames = [socket_path]
        p.api_keys = [key]
        if self.local.template is not None:
            p.chat_template = self.local.template
            p.use_jinja = True
        try:
            server = xllamacpp.Server(p)
        except RuntimeError as e:
            raise ConfigError(f"{self.local.info.path}: llama.cpp could not load it: {e}") from None
        client = httpx.Client(
            transport=httpx.HTTPTransport(uds=socket_path),
            base_url="http://llama.cpp",
            headers={"Authorization": f"Bearer {key}"},
            timeout=60.0,
        )
        return server, client

    # ------------------------------------------------------------ the backend protocol

    async def chat(self, request: ChatRequest) -> Completion:
        started = time.perf_counter()
        rendered = await asyncio.to_thread(self._prompt_ids, request.messages, request.tools)
        prompt_ids = await self._sequences.going_on(rendered, self.tokenize, self.detokenize)
        cancel = threading.Event()
        self._cancels.add(cancel)
        loop = asyncio.get_running_loop()
        try:
            completion = await loop.run_in_executor(
                self._pool, self._generate, request, prompt_ids, cancel, started
            )
        finally:
            cancel.set()  # a cancelled episode's generation stops at its next token
            self._cancels.discard(cancel)
        sequence = prompt_ids + (completion.completion_ids or [])
        self._sequences.remember(await self.detokenize(sequence), sequence)
        return completion

    async def continue_message(self, request: ChatRequest, method: ContinueChoice) -> Completion:
        if not request.messages or request.messages[-1].role != "assistant":
            raise ValueError("continue_message needs a partial assistant message last")
        chosen = pick_continuation(method, self.capabilities, self.server_name)
        completion = await self.chat(request)
        completion.continuation = chosen
        return completion

    async def server_info(self) -> ServerInfo:
        import xllamacpp

        return ServerInfo(kind="local", name="llama.cpp (xllamacpp)", version=xllamacpp.__version__)

    async def model_names(self) -> list[str]:
        return [self.model]

    async def model_features(self) -> set[str]:
        return {"completion"}

    @property
    def engine(self) -> Engine | None:
        """The loaded ``xllamacpp.Server`` (benchmarks call it directly to compare)."""
        return self._server

    async def prompt_ids(self, messages: list[ChatMessage]) -> list[int]:
        """The token ids the model is given for ``messages`` (a partial assistant message
        last is left open)."""
        return await asyncio.to_thread(self._prompt_ids, messages)

    async def tokenize(self, text: str) -> list[int]:
        """``text`` as the model's token ids, special tokens (``<|im_end|>``) read as such."""
        return await asyncio.to_thread(self._tokenize, text, False)

    async def detokenize(self, ids: list[int]) -> str:
        return await asyncio.to_thread(self._detokenize, ids)

    async def aclose(self) -> None:
        for cancel in list(self._cancels):
            cancel.set()
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        """Stop the engine and remove its folder (once; closing again does nothing)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._http is not None:
            self._http.close()
            self._http = None
        self._server = None  # its destructor stops llama.cpp's loop and listener
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    # ------------------------------------------------------------ one request, in a worker thread

    def _generate(
        self, request: ChatRequest, prompt_ids: list[int], cancel: threading.Event, started: float
    ) -> Completion:
        o = request.options
        room = self.context_tokens - len(prompt_ids)
        stream = _Stream(o.stop, cancel, request.top_logprobs, started)
        if room > 0:
            body: dict[str, Any] = {
                "prompt": prompt_ids,
                "stream": True,
                "max_tokens": min(o.max_tokens or room, room),
                "logprobs": max(1, request.top_logprobs),  # ids come with the logprobs
                "cache_prompt": True,
            }
            for key, value in (
                ("temperature", o.temperature),
                ("top_p", o.top_p),
                ("top_k", o.top_k),
                ("seed", o.seed),
            ):
                if value is not None:
                    body[key] = value
            if o.grammar is not None:
                body["grammar"] = o.grammar.gbnf
            if request.processed_logprobs:
                body["post_sampling_probs"] = True
            if self._server is None:
                raise ServerError("the local model is not loaded")
            try:
                self._server.handle_completions(body, stream.on_chunk)
            except ValueError as e:
                raise BadRequest(f"llama.cpp refused the request: {e}") from None
        else:
            stream.finish = "length"  # the conversation fills the context: nothing more fits
        completion = stream.completion(self.model, prompt_ids, request.logprobs)
        check_ids(completion.completion_ids or [], self.local.info.vocab or None, HOST)
        completion.logprobs_kind = logprobs_kind(self.capabilities, request)
        return completion

    def _prompt_ids(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None
    ) -> list[int]:
        """Render ``messages`` (and ``tools``, where the template shows them) with the chat
        template, then tokenize the text as llama.cpp's own chat endpoint would."""
        body: dict[str, Any] = {"messages": [_message(m) for m in messages]}
        if tools:
            body["tools"] = tools
        prompt = self._post("/apply-template", body).get("prompt")
        if not isinstance(prompt, str):
            raise ServerError("llama.cpp rendered no prompt")
        return self._tokenize(prompt, True)

    def _tokenize(self, text: str, add_special: bool) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": True}
        ids = self._post("/tokenize", body).get("tokens")
        if not isinstance(ids, list):
            raise ServerError("llama.cpp returned no token ids")
        return check_ids([int(i) for i in ids], self.local.info.vocab or None, HOST, "prompt token")

    def _detokenize(self, ids: list[int]) -> str:
        return str(self._post("/detokenize", {"tokens": ids}).get("content", ""))

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._http is None:
            raise ServerError("the local model is not loaded")
        try:
            response = self._http.post(path, json=body)
        except httpx.TransportError as e:
            raise ServerError(f"llama.cpp's listener failed: {type(e).__name__}") from None
        data = response.json() if response.content else {}
        if response.status_code != 200:
            message = (data.get("error") or {}).get("message") if isinstance(data, dict) else None
            raise BadRequest(f"llama.cpp refused {path}: {message or response.status_code}")
        return data if isinstance(data, dict) else {}


def _message(m: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id or f"call_{i}",
                "type": "function",
                "function": {"name": c.function.name, "arguments": _json(c.function.arguments)},
            }
            for i, c in enumerate(m.tool_calls)
        ]
    if m.tool_name:
        out["name"] = m.tool_name
    return out


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


class _Stream:
    """The chunks of one streamed completion: text and tokens, cut at the first stop string."""

    def __init__(self, stops: list[str], cancel: threading.Event, top: int, started: float) -> None:
        self.stops = [s for s in stops if s]
        self.longest = max((len(s) for s in self.stops), default=0)
        self.cancel = cancel
        self.top = top
        self.started = started
        self.first_token: float | None = None
        self.text = ""
        self.content: str | None = None
        self.tokens: list[TokenLogprob] = []
        self.finish: FinishReason | None = None
        self.error: BackendError | None = None
        self.timings: dict[str, Any] = {}

    def on_chunk(self, chunk: Any) -> bool:
        """Called by llama.cpp for every chunk; True stops the generation. Never raises
        (an exception here would be swallowed)."""
        try:
            return self._take(chunk)
        except Exception as e:  # reported after the call returns
            self.error = ServerError(f"unreadable chunk from llama.cpp: {type(e).__name__}: {e}")
            return True

    def _take(self, chunk: dict[str, Any]) -> bool:
        if "error" in chunk:
            error = chunk["error"] if isinstance(chunk["error"], dict) else {}
            message = str(error.get("message") or chunk["error"])
            failed = BadRequest if error.get("code") == 400 else ServerError
            self.error = failed(f"llama.cpp: {message}")
            return True
        if self.first_token is None:
            self.first_token = time.perf_counter()
        choice = (chunk.get("choices") or [{}])[0]
        tokens = token_logprobs((choice.get("logprobs") or {}).get("content"), "llama.cpp")
        for token in tokens:
            if token.id is None:
                raise ValueError("a token without its id")
            del token.top_logprobs[self.top :]
        self.tokens += tokens
        if chunk.get("timings"):
            self.timings = chunk["timings"]
        before = len(self.text)
        self.text += choice.get("text") or ""
        if self.stops and self.content is None:
            window = self.text[max(0, before - self.longest) :]
            hits = [i for i in (window.find(s) for s in self.stops) if i >= 0]
            if hits:
                self.content = self.text[: max(0, before - self.longest) + min(hits)]
                self.finish = "stop"
                return True
        reason = choice.get("finish_reason")
        if reason is not None:
            self.finish = "length" if reason == "length" else "stop"
        return self.cancel.is_set()

    def completion(self, model: str, prompt_ids: list[int], logprobs: bool) -> Completion:
        if self.error is not None:
            raise self.error
        if self.cancel.is_set() and self.finish is None:
            raise ServerError("the request was cancelled")
        ended = time.perf_counter()
        first = self.first_token or ended
        t = self.timings
        return Completion(
            content=self.text if self.content is None else self.content,
            logprobs=self.tokens if logprobs and self.tokens else None,
            finish_reason=self.finish,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(self.tokens),
            prompt_s=t["prompt_ms"] / 1000 if "prompt_ms" in t else first - self.started,
            generation_s=t["predicted_ms"] / 1000 if "predicted_ms" in t else ended - first,
            total_s=ended - self.started,
            host=HOST,
            model=model,
            tools_in_template=not LocalBackend.capabilities.tools,
            prompt_ids=prompt_ids,
            completion_ids=[tok.id for tok in self.tokens if tok.id is not None],
        )
