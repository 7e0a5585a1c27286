"""The exceptions tracegen reports to a user as one line, and what each one stops.

The CLI turns each into one line and its ``exit_code``: 2 for what the user can fix (a flag,
a file, a missing extra), 1 for what the servers, the cluster or the hub did
(`BackendError`, `ClusterError`, `DatasetUnavailable`).

Whether a failure of the model server is retried, ends one episode or stops the run is
said here and nowhere else: each `BackendError` subclass sets `BackendError.stops` (and
`EPISODE_TRIES` says how often an episode one ended runs again), and the transport's retries
(`tracegen.llm.retries`), the host pool, the modes, `run_episode` and the executors read it
(or `BackendError.retryable`, which is ``stops == "request"``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

Stops = Literal["request", "episode", "run"]
"""What a `BackendError` stops:

- ``"request"``: trying again may fix it. The transport retries the request and the host pool
  counts it against its host; once the retries are spent, it is the episode's own failure.
- ``"episode"``: the episode's own failure, recorded in its trace (kind ``backend``); the run
  goes on.
- ``"run"``: no other episode would survive it either (an unknown model, a rejected key or
  request, a server tracegen cannot read): the run stops with its one line.
"""


EPISODE_TRIES = 5
"""How often an episode a `BackendError` ended (its retries spent, or ``stops="episode"``)
runs again later before its failure is recorded: outages and overloads pass, so only an
episode that keeps failing is recorded."""


class TracegenError(Exception):
    """Base of every error tracegen reports to a user as one line."""

    exit_code = 2


class ConfigError(TracegenError):
    """A flag, environment variable or config file value is wrong."""


class InputFileError(TracegenError):
    """A file given to tracegen is missing, unreadable or malformed."""


class JsonlError(InputFileError):
    """A JSONL line could not be read; the message names FILE:LINE."""


class ProblemFileError(InputFileError):
    """A problem set is malformed; the message names FILE:LINE where it can."""


class DatasetUnavailable(TracegenError):
    """A dataset could not be loaded from the Hugging Face hub (offline, unknown, no access)."""

    exit_code = 1


class OutputError(TracegenError):
    """An output file could not be written (disk full, permissions)."""


class MissingExtraError(TracegenError):
    """An optional dependency is needed; the message says which `pip install` fixes it."""


class ClusterError(TracegenError):
    """The Ray cluster cannot be joined, or offers no node to run episodes on."""

    exit_code = 1


class SandboxError(TracegenError):
    """The sandbox cannot run as asked (for example bubblewrap requested but missing)."""


class BackendError(TracegenError):
    """The model server failed in a way retries did not fix."""

    exit_code = 1
    stops: ClassVar[Stops] = "episode"
    """What it stops (`Stops`)."""
    answered: ClassVar[bool] = True
    """Whether the server answered at all (False: it could not be reached, or did not answer
    in time): probing what answers at a host reads an unanswered probe as nothing there, an
    answered one as a server of another kind."""
    retry_after: float | None = None
    """Seconds the server asked to wait before trying again (``Retry-After``), if it said."""

    @property
    def retryable(self) -> bool:
        """Whether trying the same request again may succeed (``stops == "request"``)."""
        return self.stops == "request"


class BackendUnavailable(BackendError):
    """The server cannot be reached (connection refused, DNS, TLS)."""

    stops: ClassVar[Stops] = "request"
    answered: ClassVar[bool] = False


class HostsDown(BackendUnavailable):
    """No host of the run has answered for the pool's ``max_outage_s``: every episode would
    fail the same way, so the run stops (and resumes once a server is back)."""

    stops = "run"


class ModelNotFound(BackendError):
    """The server does not have the requested model."""

    stops = "run"


class BadRequest(BackendError):
    """The server rejected the request (HTTP 400)."""

    stops = "run"


class AuthError(BackendError):
    """Missing or wrong API key (HTTP 401/403)."""

    stops = "run"


class Overloaded(BackendError):
    """The server is busy or rate-limiting (HTTP 429/503)."""

    stops: ClassVar[Stops] = "request"


class ServerError(BackendError):
    """The server failed (HTTP 500, or an error line mid-stream)."""

    stops: ClassVar[Stops] = "request"


class BackendTimeout(BackendError):
    """The server did not answer in time."""

    stops: ClassVar[Stops] = "request"
    answered: ClassVar[bool] = False


class ProtocolError(BackendError):
    """The server sent something that is not its wire format (a malformed line or body)."""

    stops: ClassVar[Stops] = "request"


class LogprobsMissing(BackendError):
    """--require-logprobs was given and the server returned no logprobs."""

    stops = "run"


class AnswerTooLarge(ProtocolError):
    """An answer ran past the bytes it may hold (``max_answer_bytes``): read no further."""


class ImpossibleTokenId(ProtocolError):
    """The server sent a token id outside the model's vocabulary (negative, or not below its
    size): the answer is refused, never recorded."""


class RepeatedAnswer(ProtocolError):
    """The server sent the same answer tracegen cannot read to both tries of a request: it
    would send it again, so the request is not tried again and the episode is not run again
    (its failure is recorded)."""

    stops: ClassVar[Stops] = "episode"


REPEATED_ANSWER = "repeated_answer"
"""`RepeatedAnswer`'s reason in a trace's error: such an episode is recorded, not run again."""


def runs_again(reason: str, tries: int) -> bool:
    """Whether an episode a `BackendError` ended (``reason``: its trace's error reason), run
    ``tries`` times again already, runs again later rather than being recorded: up to
    `EPISODE_TRIES` times, except after a `RepeatedAnswer`."""
    return reason != REPEATED_ANSWER and tries < EPISODE_TRIES


class UnreadableServer(BackendError):
    """The server keeps answering what tracegen cannot read: it is asked no more."""

    stops = "run"
