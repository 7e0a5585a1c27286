"""The exceptions a user can cause; the CLI turns each into one line and exit status 2."""


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
    retryable = False
    retry_after: float | None = None
    """Seconds the server asked to wait before trying again (``Retry-After``), if it said."""


class BackendUnavailable(BackendError):
    """The server cannot be reached (connection refused, DNS, TLS)."""

    retryable = True


class ModelNotFound(BackendError):
    """The server does not have the requested model."""


class BadRequest(BackendError):
    """The server rejected the request (HTTP 400)."""


class AuthError(BackendError):
    """Missing or wrong API key (HTTP 401/403)."""


class Overloaded(BackendError):
    """The server is busy or rate-limiting (HTTP 429/503)."""

    retryable = True


class ServerError(BackendError):
    """The server failed (HTTP 500, or an error line mid-stream)."""

    retryable = True


class BackendTimeout(BackendError):
    """The server did not answer in time."""

    retryable = True


class ProtocolError(BackendError):
    """The server sent something that is not its wire format (a malformed line or body)."""

    retryable = True


class LogprobsMissing(BackendError):
    """--require-logprobs was given and the server returned no logprobs."""


class AnswerTooLarge(ProtocolError):
    """An answer ran past the bytes it may hold (``max_answer_bytes``): read no further."""


class ImpossibleTokenId(ProtocolError):
    """The server sent a token id outside the model's vocabulary (negative, or not below its
    size): the answer is refused, never recorded."""


class UnreadableServer(BackendError):
    """The server keeps answering what tracegen cannot read: it is asked no more."""
