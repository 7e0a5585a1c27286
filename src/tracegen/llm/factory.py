"""The one place that names backend classes: build one per host, probe hosts, open the pool;
and decide, for ``--backend auto``, which backend a run uses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tracegen.config import DEFAULT_HOST, RunSettings, redact_url
from tracegen.errors import BackendError, BackendTimeout, BackendUnavailable, ConfigError
from tracegen.llm.base import HostBackend, RetryListener
from tracegen.llm.http import PROBE_TIMEOUT_S
from tracegen.llm.local import LocalBackend
from tracegen.llm.ollama import OllamaBackend
from tracegen.llm.packaged import DEFAULT_MODEL, find_model
from tracegen.llm.pool import HostPool

BACKENDS: dict[str, Callable[..., HostBackend]] = {"ollama": OllamaBackend}
"""Backend kinds by the name ``--backend`` takes."""


def backend_for(
    settings: RunSettings,
    host: str,
    *,
    timeout_s: float | None = None,
    max_attempts: int | None = None,
    on_retry: RetryListener | None = None,
) -> HostBackend:
    """A backend of the run's kind for ``host``; probes pass a short timeout and one attempt."""
    try:
        make = BACKENDS[settings.backend]
    except KeyError:
        raise ConfigError(
            f"unknown backend {settings.backend!r}; known: {', '.join(BACKENDS)}"
        ) from None
    options: dict[str, Any] = {
        "api_key": settings.api_key.get_secret_value() if settings.api_key else None,
        "timeout_s": settings.request_timeout_s if timeout_s is None else timeout_s,
        "max_attempts": settings.max_attempts if max_attempts is None else max_attempts,
        "retry_initial_s": settings.retry_initial_s,
        "max_connections": settings.concurrency,
        "on_retry": on_retry,
    }
    return make(host, settings.model, **options)


async def unreachable(settings: RunSettings, host: str) -> str | None:
    """Why ``host`` cannot be reached, or None: any answer from the server means it can."""
    probe = backend_for(settings, host, timeout_s=PROBE_TIMEOUT_S, max_attempts=1)
    try:
        await probe.server_info()
    except (BackendUnavailable, BackendTimeout) as e:
        return str(e)
    except BackendError:
        pass
    finally:
        await probe.aclose()
    return None


CAPABILITIES = {"local": LocalBackend.capabilities, "ollama": OllamaBackend.capabilities}
"""What each backend kind can do, known before one is built."""


async def choose_backend(settings: RunSettings, info: Callable[[str], None]) -> RunSettings:
    """``settings`` with ``backend`` decided and, for the local backend, ``model`` defaulted.

    ``auto`` runs the embedded model when nothing names a server or a model (no ``--host``,
    ``OLLAMA_HOST``, ``--model``…) and nothing answers at Ollama's default address; it says
    so in one line. Otherwise it talks to the server.
    """
    if settings.backend == "auto":
        backend = "ollama"
        if not {"hosts", "model"} & settings.model_fields_set:
            probe = settings.model_copy(update={"backend": "ollama"})
            if await unreachable(probe, DEFAULT_HOST) is not None:
                backend = "local"
                info(
                    f"no model server at {DEFAULT_HOST} and none configured: running "
                    f"{DEFAULT_MODEL} in process (--backend local; --host names a server)"
                )
        settings = settings.model_copy(update={"backend": backend})
    if settings.backend == "local" and "model" not in settings.model_fields_set:
        settings = settings.model_copy(update={"model": DEFAULT_MODEL})
    return settings


def local_backend(settings: RunSettings) -> LocalBackend:
    """The embedded model of a local run, checked (engine, file, template, memory) but not
    loaded: each problem is one line before anything is written."""
    model = find_model(settings.model, settings.chat_template)
    return LocalBackend(
        model, context_tokens=settings.num_ctx, slots=settings.concurrency, threads=settings.threads
    )


async def open_pool(
    settings: RunSettings,
    *,
    on_retry: RetryListener,
    warn: Callable[[str], None],
    local: LocalBackend | None = None,
) -> HostPool:
    """One backend per host; stop at once if no host answers, bench those that do not.
    A local run has one backend, ``local`` (built here if not given), loaded now."""
    if settings.backend == "local":
        backend = local or local_backend(settings)
        await backend.open()
        return HostPool([backend], limit=settings.concurrency)
    problems = await asyncio.gather(*(unreachable(settings, h) for h in settings.hosts))
    down = {h: p for h, p in zip(settings.hosts, problems, strict=True) if p is not None}
    if len(down) == len(settings.hosts):
        raise BackendUnavailable(
            f"{'; '.join(down.values())} (--host or OLLAMA_HOST says where the server runs)"
        )
    pool = HostPool(
        [backend_for(settings, h, on_retry=on_retry) for h in settings.hosts],
        limit=settings.concurrency,
    )
    for host, problem in down.items():
        warn(f"{redact_url(host)} does not answer ({problem}); going on with the other hosts")
        pool.bench(host, problem)
    return pool
