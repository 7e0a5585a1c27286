"""The one place that names backend classes: build one per host, probe hosts, open the pool."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tracegen.config import RunSettings, redact_url
from tracegen.errors import BackendError, BackendTimeout, BackendUnavailable, ConfigError
from tracegen.llm.base import HostBackend, RetryListener
from tracegen.llm.http import PROBE_TIMEOUT_S
from tracegen.llm.ollama import OllamaBackend
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


async def open_pool(
    settings: RunSettings, *, on_retry: RetryListener, warn: Callable[[str], None]
) -> HostPool:
    """One backend per host; stop at once if no host answers, bench those that do not."""
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
        shown = redact_url(host)
        warn(f"{shown} does not answer ({problem}); going on with the other hosts")
        pool.bench(shown, problem)
    return pool
