"""`run_episode`: the one way an episode runs — for the local executor, other executors and
library users alike."""

from __future__ import annotations

from typing import Protocol

from tracegen.episode.limits import backend_failure
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import BackendError, TracegenError
from tracegen.llm.base import Backend
from tracegen.sandbox.base import CodeRunner
from tracegen.schema import Trace, TraceError


class Conversation(Protocol):
    """What `run_episode` needs of a mode (`tracegen.modes.Mode`, from `get_mode`): it holds
    one episode's conversation and returns its trace."""

    async def run(self, spec: EpisodeSpec, backend: Backend, sandbox: CodeRunner) -> Trace: ...


async def run_episode(
    spec: EpisodeSpec, mode: Conversation, backend: Backend, sandbox: CodeRunner
) -> Trace:
    """Hold one episode's conversation in ``mode`` (the caller resolves it:
    ``get_mode(spec.settings.mode)``) and score it; always a `Trace`.

    A failure of the episode itself (a limit, an unreadable tool call, a backend that gave
    up on a request, a bug) is recorded in the trace's ``error``. Errors no other episode
    would survive either — a backend error that stops the run (`tracegen.errors.Stops`:
    an unknown model, a rejected key, a bad request…), a broken setting — are raised, so the
    caller can stop.
    """
    try:
        return await mode.run(spec, backend, sandbox)
    except BackendError as e:
        if e.stops == "run":
            raise
        return spec.failed(backend_failure(e))
    except TracegenError:
        raise
    except Exception as e:
        message = f"{type(e).__name__}: {e}"
        return spec.failed(
            TraceError(kind="internal", reason="unexpected_exception", message=message)
        )
