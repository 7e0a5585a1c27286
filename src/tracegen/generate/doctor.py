"""`tracegen doctor`: server reachable (or the embedded model loadable), model there, logprobs
returned, sandbox isolated?"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.table import Table

from tracegen.config import RunSettings, redact_url
from tracegen.errors import BackendError, ModelNotFound, TracegenError
from tracegen.llm.base import Backend, ChatRequest, HostBackend, SamplingOptions
from tracegen.llm.factory import backend_for, choose_backend, local_backend
from tracegen.llm.http import PROBE_TIMEOUT_S
from tracegen.sandbox import detect_isolation
from tracegen.schema import ChatMessage

Status = Literal["ok", "warn", "fail"]
_MARKS = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}


@dataclass
class Check:
    """One row of the report."""

    name: str
    status: Status
    detail: str


def doctor_command(settings: RunSettings) -> int:
    """Print the checks as a table; 0 when nothing failed, 1 otherwise."""
    checks = asyncio.run(run_checks(settings))
    table = Table(title="tracegen doctor", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for c in checks:
        table.add_row(c.name, _MARKS[c.status], c.detail)
    console = Console()
    console.print(table)
    failed = sum(c.status == "fail" for c in checks)
    if failed:
        console.print(f"[red]{failed} check(s) failed[/]")
        return 1
    console.print("[green]ready[/]")
    return 0


async def run_checks(settings: RunSettings) -> list[Check]:
    """Every host's checks (or the embedded model's), then the sandbox's."""
    settings = await choose_backend(settings, lambda _: None)
    checks: list[Check] = []
    if settings.backend == "local":
        checks += await check_local(settings)
    else:
        for host in settings.hosts:
            checks += await check_host(settings, host)
    checks.append(check_sandbox(settings))
    return checks


async def check_local(settings: RunSettings) -> list[Check]:
    """The embedded model: its file, size, context, template; loading it; a one-token probe."""
    try:
        backend = local_backend(settings)
    except TracegenError as e:
        return [Check("model", "fail", str(e))]
    m = backend.local
    checks = [
        Check(
            "model",
            "ok",
            f"{m.name}: {m.info.path} ({m.summary}; {m.info.size_bytes / 1e6:.0f} MB, "
            f"family {m.info.architecture})",
        ),
        Check(
            "context",
            "ok",
            f"trained for {m.info.context_length} tokens; runs with "
            f"{backend.context_tokens} × {backend.slots} slot(s)",
        ),
        Check("template", "ok", f"chat template from {m.template_source}"),
    ]
    try:
        await backend.open()
        info = await backend.server_info()
        checks.append(
            Check(
                "engine",
                "ok",
                f"{info.name} {info.version}: loaded in {backend.load_s:.1f}s, "
                f"{backend.threads} thread(s)",
            )
        )
        checks.append(await _logprobs(settings, "", backend))
    except TracegenError as e:
        checks.append(Check("engine", "fail", str(e)))
    finally:
        await backend.aclose()
    return checks


async def check_host(settings: RunSettings, host: str) -> list[Check]:
    """Reachability and version, the model, its features, logprobs on a one-token request."""
    prefix = f"{host} " if len(settings.hosts) > 1 else ""
    probe_s = min(settings.request_timeout_s, PROBE_TIMEOUT_S)
    probe = backend_for(settings, host, timeout_s=probe_s, max_attempts=1)
    try:
        info = await probe.server_info()
    except BackendError as e:
        return [Check(f"{prefix}host", "fail", str(e))]
    finally:
        await probe.aclose()
    shown = redact_url(host)
    checks = [Check(f"{prefix}host", "ok", f"{shown} reachable, {info.name} {info.version}")]
    backend = backend_for(settings, host, max_attempts=1)
    try:
        try:
            features = await backend.model_features()
        except ModelNotFound as e:
            return [*checks, Check(f"{prefix}model", "fail", await _not_found(backend, e))]
        except BackendError as e:
            return [*checks, Check(f"{prefix}model", "fail", str(e))]
        checks.append(Check(f"{prefix}model", "ok", f"{settings.model} present"))
        checks.append(_capability(settings, prefix, "tools", features))
        checks.append(_capability(settings, prefix, "thinking", features))
        checks.append(await _logprobs(settings, prefix, backend))
        return checks
    finally:
        await backend.aclose()


async def _not_found(backend: HostBackend, error: ModelNotFound) -> str:
    try:
        names = await backend.model_names()
    except BackendError:
        return str(error)
    shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    return f"{error} (available: {shown or 'none'})"


def _capability(settings: RunSettings, prefix: str, name: str, features: set[str]) -> Check:
    if name in features:
        return Check(f"{prefix}{name}", "ok", f"{settings.model} supports {name}")
    needed = (name == "tools" and settings.mode == "native-tools") or (
        name == "thinking" and settings.think is True
    )
    why = "needed by your settings" if needed else "not needed by your settings"
    return Check(f"{prefix}{name}", "fail" if needed else "warn", f"not supported ({why})")


async def _logprobs(settings: RunSettings, prefix: str, backend: Backend) -> Check:
    request = ChatRequest(
        messages=[ChatMessage(role="user", content="Say OK.")],
        options=SamplingOptions(max_tokens=1, context_tokens=settings.num_ctx),
        logprobs=True,
    )
    name = f"{prefix}logprobs"
    try:
        completion = await backend.chat(request)
    except BackendError as e:
        return Check(name, "fail", f"a one-token request failed: {e}")
    if completion.logprobs:
        detail = f"returned ({len(completion.logprobs)} token(s))"
        if completion.completion_ids:
            first = completion.logprobs[0]
            detail += f" with token ids: {first.token!r} id {first.id}, logprob {first.logprob:.2f}"
        return Check(name, "ok", detail)
    detail = "the server returned none: traces will say logprobs_status=absent"
    if settings.require_logprobs:
        return Check(name, "fail", f"{detail}, and --require-logprobs is set")
    return Check(name, "warn", detail)


def check_sandbox(settings: RunSettings) -> Check:
    """Which isolation the sandbox would use, and why it fell back if it did."""
    try:
        info = detect_isolation(settings.sandbox)
    except TracegenError as e:
        return Check("sandbox", "fail", str(e))
    detail = f"{info.name}: {info.detail}" if info.detail else info.name
    if info.warning:
        return Check("sandbox", "warn", f"{detail} ({info.warning})")
    if settings.backend == "local" and info.name == "rlimit":
        return Check("sandbox", "warn", f"{detail}; {RLIMIT_AND_LOCAL}")
    return Check("sandbox", "ok", detail)


RLIMIT_AND_LOCAL = (
    "without network isolation generated code can reach the embedded model's listener "
    "(a Unix socket in a private 0700 folder that also requires a random key: as root the "
    "code runs under another uid and cannot enter the folder; as a normal user only the key "
    "stops it)"
)
