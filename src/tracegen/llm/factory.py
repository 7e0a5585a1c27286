"""The one place that names backend classes: build one per host, find out what answers at a
host (``--backend auto``), or run the embedded model when nothing does; open the pool."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tracegen.config import DEFAULT_HOST, RunSettings, redact_url
from tracegen.errors import BackendError, BackendUnavailable, ConfigError
from tracegen.llm.base import (
    Capabilities,
    HostBackend,
    RetryListener,
    ServerInfo,
    pick_continuation,
)
from tracegen.llm.local import LocalBackend
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.openai import OpenAIBackend
from tracegen.llm.packaged import DEFAULT_MODEL, PACKAGED, find_model
from tracegen.llm.pool import HostPool
from tracegen.llm.server_backend import PROBE_TIMEOUT_S


class ServerBackend(Protocol):
    """A backend class for a model server: built per host, its API key in ``key_settings``."""

    @property
    def key_settings(self) -> tuple[str, ...]: ...

    def __call__(self, *args: Any, **kwargs: Any) -> HostBackend: ...


@dataclass(frozen=True)
class BackendKind:
    """One kind ``--backend`` takes: the class that talks to its servers (None: the embedded
    model, `LocalBackend`), and what it can do where that is known before anything answers
    (an OpenAI-compatible server's depends on which server it is)."""

    server: ServerBackend | None
    capabilities: Capabilities | None
    in_process: bool = False
    """Whether it runs the model in tracegen's own process (no host): its episodes run in this
    process only, a first run on its default model starts small (`tracegen.generate.first_run`)
    and ``--constrain auto`` constrains where that was measured to help (`Mode.constrain_auto`)."""


BACKENDS: dict[str, BackendKind] = {
    "ollama": BackendKind(OllamaBackend, OllamaBackend.capabilities),
    "openai": BackendKind(OpenAIBackend, None),
    "local": BackendKind(None, LocalBackend.capabilities, in_process=True),
}
"""The backend kinds by the name ``--backend`` takes (with ``auto``: find out what answers);
model servers in the order ``auto`` tries them."""
AUTO = "auto"
SERVERS: dict[str, ServerBackend] = {k: b.server for k, b in BACKENDS.items() if b.server}


def backend_names() -> tuple[str, ...]:
    """What ``--backend`` takes: ``auto`` and every kind of `BACKENDS`."""
    return (AUTO, *BACKENDS)


def known_capabilities(kind: str) -> Capabilities | None:
    """What a backend kind can do, where known before anything answers."""
    entry = BACKENDS.get(kind)
    return entry.capabilities if entry else None


def runs_in_process(kind: str) -> bool:
    """Whether the backend kind runs its model in this process (`BackendKind.in_process`)."""
    entry = BACKENDS.get(kind)
    return entry is not None and entry.in_process


def check_kind(settings: RunSettings) -> None:
    """A `ConfigError` for a ``--backend`` that is not one of `backend_names`."""
    if settings.backend not in backend_names():
        raise ConfigError(
            f"--backend: expected one of {', '.join(backend_names())}, got {settings.backend!r}"
        )


@dataclass(frozen=True)
class Found:
    """What answers at a host: the backend kind and, when the server said, who it is."""

    kind: str
    server: ServerInfo | None


def request_timeout_s(settings: RunSettings) -> float:
    """How long one try of a model request may take: ``request_timeout_s``, capped by the
    outage window (and no try starts after the window: `backend_for`). A request that has not
    answered within the window counts as the host failing for all of it, so a server that
    trickles its answer a byte at a time (never idle, never done) stops the run within the
    window like one that refuses, not after the request's own ten minutes."""
    return min(settings.request_timeout_s, settings.max_outage_s)


def backend_for(
    settings: RunSettings,
    host: str,
    *,
    kind: str | None = None,
    model: str | None = None,
    server: ServerInfo | None = None,
    timeout_s: float | None = None,
    max_attempts: int | None = None,
    on_retry: RetryListener | None = None,
) -> HostBackend:
    """A backend of ``kind`` asking for ``model`` (default: the settings' own; a run passes
    its `BackendChoice`) for ``host``; probes pass a short timeout and one attempt."""
    kind = kind or settings.backend
    try:
        make = SERVERS[kind]
    except KeyError:
        raise ConfigError(f"unknown backend {kind!r}; known: {', '.join(SERVERS)}") from None
    key = next((v for v in (getattr(settings, k) for k in make.key_settings) if v), None)
    options: dict[str, Any] = {
        "api_key": key.get_secret_value() if key else None,
        "timeout_s": request_timeout_s(settings) if timeout_s is None else timeout_s,
        "max_attempts": settings.max_attempts if max_attempts is None else max_attempts,
        "retry_initial_s": settings.retry_initial_s,
        "on_retry": on_retry,
        "max_answer_bytes": settings.max_answer_bytes,
        "max_request_s": settings.max_outage_s,
    }
    if server is not None:
        options["server"] = server
    return make(host, model or settings.model, **options)


async def identify(
    settings: RunSettings,
    host: str,
    *,
    kind: str | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Found | str:
    """What answers at ``host`` (each kind in turn for ``auto``), or why nothing does;
    ``kind``: the backend kind chosen (default: the settings' ``--backend``).

    With one ``--backend``, any answer means the host is up, even when the server would not
    say who it is; ``auto`` needs a server to recognise. A kind whose key cannot go with the
    URL's credentials is not asked; if no other kind answers, that is the error.
    """
    chosen = kind or settings.backend
    kinds = list(SERVERS) if chosen == AUTO else [chosen]
    problem = ""
    conflict: ConfigError | None = None
    for each in kinds:
        try:
            probe = backend_for(settings, host, kind=each, timeout_s=timeout_s, max_attempts=1)
        except ConfigError as e:  # this kind's key and the URL's credentials: if it is this kind
            if chosen != AUTO:
                raise
            conflict = conflict or e
            continue
        try:
            return Found(each, await probe.server_info())
        except BackendError as e:
            if not e.answered:
                return str(e)
            problem = str(e)
        finally:
            await probe.aclose()
    if chosen != AUTO:
        return Found(chosen, None)
    if conflict is not None:
        raise conflict
    return (
        f"neither Ollama nor an OpenAI-compatible server answers at {redact_url(host)} ({problem})"
    )


def one_kind(found: dict[str, Found]) -> str:
    """The backend kind every answering host shares; a `ConfigError` naming them if not."""
    kinds = {f.kind for f in found.values()}
    if len(kinds) > 1:
        named = "; ".join(
            f"{redact_url(h)} is {f.server.name if f.server else f.kind} ({f.kind})"
            for h, f in found.items()
        )
        raise ConfigError(
            f"one run talks to one kind of server, but {named}: choose hosts of one kind"
        )
    return kinds.pop()


@dataclass(frozen=True)
class BackendChoice:
    """What ``--backend`` and ``--model`` come to before anything runs (`choose_backend`):
    the settings' own names unless ``auto`` settled on the embedded model, whose default model
    a local run takes when none is named. The run's setup records it; the settings keep what
    the user gave."""

    backend: str
    """The backend kind: one of `BACKENDS`, or ``auto`` until a server answers (the pool's
    ``kind`` then says which)."""
    model: str
    """The model the episodes are asked of."""


async def choose_backend(settings: RunSettings, info: Callable[[str], None]) -> BackendChoice:
    """What ``settings`` run on: a local run decided, its ``model`` defaulted, and
    ``--constrain on`` refused where the backend kind is known to take no grammar.

    ``auto`` runs the embedded model when ``--model`` names a GGUF file that exists or a
    packaged model and no host is named, or when nothing names a server or a model (no
    ``--host``, ``OLLAMA_HOST``, ``--model``…) and nothing answers at Ollama's default
    address; it says so in one line. Otherwise it stays ``auto``, and `open_pool` finds out
    what answers.
    """
    check_kind(settings)
    kind = settings.backend
    if kind == AUTO and "hosts" not in settings.model_fields_set:
        if "model" in settings.model_fields_set and names_local_model(settings.model):
            info(f"running {settings.model} in process (--backend local; --host names a server)")
            kind = "local"
        elif "model" not in settings.model_fields_set and not isinstance(
            await identify(settings, DEFAULT_HOST), Found
        ):
            info(
                f"no model server at {DEFAULT_HOST} and none configured: running "
                f"{DEFAULT_MODEL} in process (--backend local; --host names a server)"
            )
            kind = "local"
    named = "model" in settings.model_fields_set
    model = DEFAULT_MODEL if runs_in_process(kind) and not named else settings.model
    known = known_capabilities(kind)
    if known is not None:
        check_grammar(settings, known, f"--backend {kind}")
    return BackendChoice(kind, model)


def check_grammar(settings: RunSettings, capabilities: Capabilities, server: str) -> None:
    """A `ConfigError` when ``--constrain on`` asks ``server`` for what it cannot do."""
    if settings.constrain == "on" and not capabilities.grammar:
        raise ConfigError(
            f"--constrain on needs a backend that takes a grammar (local, or llama.cpp's "
            f"server, vLLM or SGLang), and {server} does not: drop it or use another backend"
        )


def names_local_model(model: str) -> bool:
    """Whether ``model`` is what only the embedded backend runs: a packaged model's name or
    a ``.gguf`` file that exists (a server's model names are neither)."""
    path = Path(model).expanduser()
    return model in PACKAGED or (path.suffix.lower() == ".gguf" and path.is_file())


def local_backend(settings: RunSettings, model: str) -> LocalBackend:
    """The embedded ``model`` (a `BackendChoice`'s) of a local run, checked (engine, file,
    template, memory) but not loaded: each problem is one line before anything is written."""
    return LocalBackend(
        find_model(model, settings.chat_template),
        context_tokens=settings.num_ctx,
        slots=settings.concurrency,
        threads=settings.threads,
    )


async def open_pool(
    settings: RunSettings,
    chosen: BackendChoice,
    *,
    on_retry: RetryListener,
    warn: Callable[[str], None],
    continues_message: bool = False,
    local: LocalBackend | None = None,
) -> HostPool:
    """One backend per host; stop at once if no host answers or hosts are of different kinds,
    or when a host cannot do what the run asks (``--continuation`` when the mode continues
    messages, ``--constrain on``); bench the hosts that do not answer. ``chosen``: the backend
    kind and model the run's setup decided. A local run has one backend, ``local`` (built here
    if not given), loaded now."""
    if runs_in_process(chosen.backend):
        model = local or local_backend(settings, chosen.model)
        if continues_message:
            pick_continuation(settings.continuation, model.capabilities, model.server_name)
        try:
            await model.open()
        except BaseException:
            await model.aclose()
            raise
        pool = HostPool([model], limit=settings.concurrency, max_outage_s=math.inf)  # in process
        pool.kind = "local"
        return pool
    answers = await asyncio.gather(
        *(identify(settings, h, kind=chosen.backend) for h in settings.hosts)
    )
    found = {h: a for h, a in zip(settings.hosts, answers, strict=True) if isinstance(a, Found)}
    down = {h: a for h, a in zip(settings.hosts, answers, strict=True) if isinstance(a, str)}
    if not found:
        raise BackendUnavailable(
            f"{'; '.join(down.values())} (--host or OLLAMA_HOST says where the server runs)"
        )
    kind = one_kind(found)
    backends = [
        backend_for(
            settings,
            h,
            kind=kind,
            model=chosen.model,
            server=found[h].server if h in found else None,
            on_retry=on_retry,
        )
        for h in settings.hosts
    ]
    pool = HostPool(backends, limit=settings.concurrency, max_outage_s=settings.max_outage_s)
    pool.kind = kind
    try:
        for backend in backends:
            if backend.host in found:
                server = found[backend.host].server
                name = f"{server.name if server else kind} at {redact_url(backend.host)}"
                if continues_message:
                    pick_continuation(settings.continuation, backend.capabilities, name)
                check_grammar(settings, backend.capabilities, name)
    except ConfigError:
        await pool.aclose()
        raise
    for host, problem in down.items():
        shown = redact_url(host)
        warn(f"{shown} does not answer ({problem}); going on with the other hosts")
        pool.bench(shown, problem)
    return pool
