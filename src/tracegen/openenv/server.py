"""tracegen's OpenEnv environment served by OpenEnv's own server (``create_app``).

``python -m tracegen.openenv`` serves it with uvicorn; tracegen's settings come as for
``tracegen run`` from ``TRACEGEN_*`` variables or ``--config FILE`` (``mode``,
``problems``, ``sandbox``, ``exec_timeout``, ``max_iterations``…). ``openenv.yaml`` beside
this file names ``tracegen.openenv.server:app`` (built from the environment's settings when
first read), so OpenEnv's tooling serves it too.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from openenv.core.env_server.http_server import create_app

from tracegen.config import RunSettings, load_settings
from tracegen.errors import TracegenError
from tracegen.generate.handoff import HandedRuns
from tracegen.openenv.environment import NoEpisode, TracegenOpenEnv
from tracegen.openenv.models import TracegenAction, TracegenObservation, TracegenState

MAX_SESSIONS = 64


def make_app(settings: RunSettings | None = None, max_sessions: int = MAX_SESSIONS) -> Any:
    """OpenEnv's FastAPI app for tracegen's environment, at most ``max_sessions`` episodes
    (WebSocket sessions) at once, all on one warm sandbox."""
    runs = HandedRuns(settings or load_settings(RunSettings, {}))
    app = create_app(
        functools.partial(TracegenOpenEnv, runs),
        TracegenAction,
        TracegenObservation,
        env_name="tracegen",
        max_concurrent_envs=max_sessions,
        state_cls=TracegenState,
    )
    app.router.on_shutdown.append(runs.aclose)  # the sandbox's processes end with the server
    app.add_exception_handler(NoEpisode, _stateless_step)
    return app


STATELESS = (
    "POST /step cannot continue an episode: OpenEnv's HTTP API makes a new environment for "
    "each request; run episodes in a WebSocket session (/ws: EnvClient, GenericEnvClient)"
)


async def _stateless_step(request: Any, exc: Exception) -> Any:
    """OpenEnv's ``POST /step`` (and only it: a WebSocket session answers its own errors)
    reaches no episode: 409 with what to do, rather than a bare 500."""
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=409, content={"detail": STATELESS})


def __getattr__(name: str) -> Any:
    if name == "app":  # `tracegen.openenv.server:app`, as openenv.yaml names it
        app = make_app()
        globals()["app"] = app
        return app
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tracegen.openenv",
        description="Serve tracegen as an OpenEnv environment (settings: TRACEGEN_* or --config).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--config", type=Path, default=None, help="a tracegen config file")
    parser.add_argument("--max-sessions", type=int, default=MAX_SESSIONS, help="episodes at once")
    args = parser.parse_args(argv)
    import uvicorn

    try:
        settings = load_settings(RunSettings, {}, config_file=args.config)
        app = make_app(settings, args.max_sessions)
    except TracegenError as e:
        print(f"tracegen: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
