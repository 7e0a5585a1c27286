"""`tracegen doctor`: server reachable (which one) or the embedded model loadable, model there,
tools, logprobs, token ids and continuation working (a one-token request each), sandbox
isolated?"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from rich.text import Text

from tracegen.config import RunSettings, redact_url
from tracegen.errors import BackendError, ConfigError, TracegenError
from tracegen.llm.base import ChatRequest, Completion, HostBackend, SamplingOptions
from tracegen.llm.factory import (
    BackendChoice,
    Found,
    backend_for,
    choose_backend,
    identify,
    local_backend,
    runs_in_process,
)
from tracegen.llm.server_backend import PROBE_TIMEOUT_S
from tracegen.modes import get_mode
from tracegen.parsing.tool_parsers import choose_parser
from tracegen.sandbox import detect_isolation
from tracegen.sandbox.programs import CPP_COMMAND, compiler_missing
from tracegen.schema import ChatMessage
from tracegen.terminal import console, text_table, untrusted

PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    },
}

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
    table = text_table(title="tracegen doctor", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for c in checks:
        table.add_row(untrusted(c.name), Text.from_markup(_MARKS[c.status]), untrusted(c.detail))
    out = console()
    out.print(table)
    failed = sum(c.status == "fail" for c in checks)
    if failed:
        out.print(f"[red]{failed} check(s) failed[/]")
        return 1
    out.print("[green]ready[/]")
    return 0


async def run_checks(settings: RunSettings) -> list[Check]:
    """Every host's checks (or the embedded model's), then the sandbox's."""
    chosen = await choose_backend(settings, lambda _: None)
    checks: list[Check] = []
    if runs_in_process(chosen.backend):
        checks += await check_local(settings, chosen.model)
    else:
        for host in settings.hosts:
            checks += await check_host(settings, chosen, host)
    checks.append(check_sandbox(settings, chosen.backend))
    checks.append(check_compiler())
    checks.append(check_java())
    return checks


async def check_local(settings: RunSettings, model: str) -> list[Check]:
    """The embedded ``model``: its file, size, context, template; loading it; a one-token
    probe."""
    try:
        backend = local_backend(settings, model)
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
        _tool_parser(settings, model, "", m.template or m.info.chat_template),
    ]
    try:
        await backend.open()
        info = await backend.server_info()
        checks.append(
            Check(
                "engine",
                "ok",
                f"{info.name} {info.version}: loaded in {backend.load_s:.1f}s, "
                f"{backend.threads_why}",
            )
        )
        checks += await _logprobs(settings, "", backend)
        checks.append(await _continuation(settings, "", backend, info.name))
    except TracegenError as e:
        checks.append(Check("engine", "fail", str(e)))
    finally:
        await backend.aclose()
    return checks


async def check_host(settings: RunSettings, chosen: BackendChoice, host: str) -> list[Check]:
    """Who answers and its version, the model, its features, then one-token requests: tools,
    logprobs and token ids, continuation."""
    prefix = f"{redact_url(host)} " if len(settings.hosts) > 1 else ""
    probe_s = min(settings.request_timeout_s, PROBE_TIMEOUT_S)
    found = await identify(settings, host, kind=chosen.backend, timeout_s=probe_s)
    if not isinstance(found, Found):
        return [Check(f"{prefix}host", "fail", found)]
    shown = redact_url(host)
    server = f"{found.server.name} {found.server.version}".rstrip() if found.server else found.kind
    checks = [Check(f"{prefix}host", "ok", f"{shown} reachable, {server}")]
    backend = backend_for(
        settings,
        host,
        kind=found.kind,
        model=chosen.model,
        server=found.server,
        max_attempts=1,
    )
    try:
        try:
            features = await backend.model_features()
        except BackendError as e:
            said = await _not_found(backend, e) if e.model_missing else str(e)
            return [*checks, Check(f"{prefix}model", "fail", said)]
        checks.append(Check(f"{prefix}model", "ok", f"{chosen.model} present"))
        checks.append(await _tools(settings, chosen.model, prefix, backend, features))
        checks.append(_tool_parser(settings, chosen.model, prefix, None))
        checks.append(_capability(settings, chosen.model, prefix, "thinking", features))
        checks += await _logprobs(settings, prefix, backend)
        checks.append(await _continuation(settings, prefix, backend, server))
        return checks
    finally:
        await backend.aclose()


async def _not_found(backend: HostBackend, error: BackendError) -> str:
    try:
        names = await backend.model_names()
    except BackendError:
        return str(error)
    shown = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    return f"{error} (available: {shown or 'none'})"


def _capability(
    settings: RunSettings, model: str, prefix: str, name: str, features: set[str]
) -> Check:
    if name in features:
        return Check(f"{prefix}{name}", "ok", f"{model} supports {name}")
    needed = (name == "tools" and settings.mode == "native-tools") or (
        name == "thinking" and settings.think is True
    )
    why = "needed by your settings" if needed else "not needed by your settings"
    return Check(f"{prefix}{name}", "fail" if needed else "warn", f"not supported ({why})")


def _one_token(settings: RunSettings, *messages: tuple[str, str]) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage(role=r, content=c) for r, c in messages],  # type: ignore[arg-type]
        options=SamplingOptions(max_tokens=1, context_tokens=settings.num_ctx),
        logprobs=True,
    )


def _tool_parser(settings: RunSettings, model: str, prefix: str, template: str | None) -> Check:
    """Which family's parser reads tool calls written as text (``--tool-parser``) of
    ``model``."""
    name = f"{prefix}tool parser"
    try:
        choice = choose_parser(settings.tool_parser, template, model)
    except ConfigError as e:
        return Check(name, "fail", str(e))
    return Check(name, "ok", choice.describe())


async def _tools(
    settings: RunSettings, model: str, prefix: str, backend: HostBackend, features: set[str]
) -> Check:
    check = _capability(settings, model, prefix, "tools", features)
    if check.status != "ok":
        return check
    request = _one_token(settings, ("user", "Say OK."))
    request.tools = [PYTHON_TOOL]
    try:
        await backend.chat(request)
    except BackendError as e:
        refused = e.refused and settings.mode != "native-tools"
        return Check(check.name, "warn" if refused else "fail", f"a request with tools failed: {e}")
    return check


async def _logprobs(settings: RunSettings, prefix: str, backend: HostBackend) -> list[Check]:
    """Logprobs and token ids, from one one-token request."""
    name = f"{prefix}logprobs"
    try:
        completion = await backend.chat(_one_token(settings, ("user", "Say OK.")))
    except BackendError as e:
        return [Check(name, "fail", f"a one-token request failed: {e}")]
    if completion.logprobs:
        detail = f"returned ({len(completion.logprobs)} token(s))"
        first = completion.logprobs[0]
        if first.id is not None:
            detail += f" with token ids: {first.token!r} id {first.id}, logprob {first.logprob:.2f}"
        check = Check(name, "ok", detail)
    else:
        detail = "the server returned none: traces will say logprobs_status=absent"
        if settings.require_logprobs:
            check = Check(name, "fail", f"{detail}, and --require-logprobs is set")
        else:
            check = Check(name, "warn", detail)
    return [check, _token_ids(prefix, backend, completion)]


def _token_ids(prefix: str, backend: HostBackend, completion: Completion) -> Check:
    name = f"{prefix}token ids"
    if completion.prompt_ids is not None and completion.completion_ids is not None:
        counts = f"{len(completion.prompt_ids)} prompt, {len(completion.completion_ids)} sampled"
        return Check(name, "ok", f"returned ({counts}): traces record token_requests")
    why = "the server returned none" if backend.capabilities.token_ids else "not offered"
    return Check(name, "warn", f"{why}: traces have logprobs but no token_requests")


async def _continuation(
    settings: RunSettings, prefix: str, backend: HostBackend, server: str
) -> Check:
    """``--continuation`` on a one-token request, failing only when the mode needs it."""
    name = f"{prefix}continuation"
    needed = get_mode(settings.mode).continues_message
    miss: Status = "fail" if needed else "warn"
    request = _one_token(settings, ("user", "Count to three."), ("assistant", "One, two,"))
    try:
        completion = await backend.continue_message(request, settings.continuation)
    except ConfigError as e:
        return Check(name, miss, str(e))
    except BackendError as e:
        return Check(name, miss, f"a one-token continuation failed: {e}")
    methods = ", ".join(backend.capabilities.continuation)
    return Check(name, "ok", f"{completion.continuation} works ({server} offers: {methods})")


def check_sandbox(settings: RunSettings, backend: str) -> Check:
    """Which isolation the sandbox would use, and why it fell back if it did; ``backend``:
    the kind chosen (the embedded model shares the rlimit sandbox's address space limit)."""
    try:
        info = detect_isolation(settings.sandbox)
    except TracegenError as e:
        return Check("sandbox", "fail", str(e))
    detail = f"{info.name}: {info.detail}" if info.detail else info.name
    if info.bwrap_problem:
        detail += f"; bubblewrap not used: {info.bwrap_problem}"
    if info.warning:
        return Check("sandbox", "warn", f"{detail} ({info.warning})")
    if runs_in_process(backend) and info.name == "rlimit":
        return Check("sandbox", "warn", f"{detail}; {RLIMIT_AND_LOCAL}")
    return Check("sandbox", "ok", detail)


def check_compiler() -> Check:
    """Whether C++ solutions of program problems can be judged here."""
    if (missing := compiler_missing("cpp")) is not None:
        return Check("c++", "warn", f"{missing}: C++ solutions are judged `error` ({GPP_HINT})")
    return Check("c++", "ok", f"g++ compiles C++ solutions ({CPP_FLAGS})")


def check_java() -> Check:
    """Whether Java solutions of program problems can be judged here."""
    if (missing := compiler_missing("java")) is not None:
        return Check("java", "warn", f"{missing}: Java solutions are judged `error` ({JDK_HINT})")
    return Check("java", "ok", "javac compiles Java solutions, a JVM runs each test")


GPP_HINT = "`apt-get install g++` to judge them"
JDK_HINT = "`apt-get install default-jdk-headless` to judge them"
CPP_FLAGS = " ".join(CPP_COMMAND[1:3])


RLIMIT_AND_LOCAL = (
    "without network isolation generated code can reach the embedded model's listener "
    "(a Unix socket in a private 0700 folder that also requires a random key: as root the "
    "code runs under another uid and cannot enter the folder; as a normal user only the key "
    "stops it)"
)
