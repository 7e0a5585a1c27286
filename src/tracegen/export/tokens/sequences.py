"""An episode as token ids: what the model saw, what it sampled, and what tracegen wrote.

A *model request* is one prompt and the ids sampled for it. With ``exact`` ids they are the
trace's ``token_requests`` as the backend returned them; with ``retokenized`` ids tracegen
rebuilds them from the messages with a tokenizer: each prompt is the chat template's
rendering of the messages before the assistant message (plus, in inline-tools, the part of
that message already written), each completion the model's piece of text, and the last
piece of a message ends with the template's end-of-turn token when that is the tokenizer's
EOS (the model learns to stop). Server-side thinking is put back before the content as
``<think>\\n…\\n</think>\\n\\n``.

Requests of one episode form one *sequence* exactly when each prompt starts with the
previous prompt and completion: the ids in between are what tracegen fed back (a result, a
tool response, the template's turn markers), masked from the loss. Otherwise the episode is
exported turn by turn, one sequence per request (chat templates that drop earlier
reasoning, Qwen3's for one, do this).

Every sequence carries the model's text it must decode to: each model step of the trace
(think, code, tool call…), located in the message and assigned to the request whose piece
holds it, must be found, in order, in the decoding of the model-sampled ids (which also hold
what tracegen cut away: a stop string, an invented result, the EOS).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from tracegen.errors import ConfigError
from tracegen.export.builder import Skipped, steps_by_message
from tracegen.schema import ChatMessage, Step, Trace

if TYPE_CHECKING:
    from tracegen.export.tokens.tokenizer import Message, Tokenizer

TokenSource = Literal["exact", "retokenized"]
Decoder = Callable[[Sequence[int]], str]
THINK = "<think>\n{}\n</think>\n\n"
UNKNOWN = "\ufffd"
_RUN_GAP = "\x00"
NOT_EXACT = "without exact ids (--require-exact)"
LAYOUT = "whose ids do not fit their messages"


@dataclass(frozen=True)
class ModelRequest:
    """One model request as ids; ``texts`` are the model's steps its completion must decode to."""

    message_index: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    texts: tuple[str, ...] = ()


@dataclass
class TokenSequence:
    """A prompt and, after it, every model-sampled id with what tracegen fed back between.

    ``env_mask`` is 1 on model-sampled ids; ``logprobs`` is aligned with ``completion_ids``
    (``0.0`` on ids tracegen wrote, None on a sampled id the backend gave no logprob for).
    ``turn`` is the request's number when the episode is exported turn by turn.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    turn: int | None = None

    def add(self, ids: Sequence[int], model: bool, logprobs: Sequence[float] | None) -> None:
        self.completion_ids += ids
        self.env_mask += [int(model)] * len(ids)
        self.logprobs += [None] * len(ids) if logprobs is None else logprobs


@dataclass
class TokenEpisode:
    """The sequences of one trace, where their ids came from, and how to decode them."""

    source: TokenSource
    sequences: list[TokenSequence]
    split: bool
    decode: Decoder


# ---------------------------------------------------------------- the model's text


def system_spans(message: ChatMessage, steps: list[Step]) -> list[tuple[int, int]]:
    """Where tracegen wrote inside an assistant message: each system step's tagged block,
    with the line break it put on either side."""
    content, spans, pos = message.content, [], 0
    for step in steps:
        if step.source != "system":
            continue
        block = f"<{step.kind}>{step.text}</{step.kind}>"
        at = content.find(block, pos)
        if at < 0:
            raise Skipped(LAYOUT, f"a <{step.kind}> tracegen wrote is not in the message")
        start, end = at, at + len(block)
        if start > pos and content[start - 1] == "\n":
            start -= 1
        if content.startswith("\n", end):
            end += 1
        spans.append((start, end))
        pos = end
    return spans


def model_pieces(message: ChatMessage, spans: list[tuple[int, int]]) -> list[str]:
    """The model's text between tracegen's spans: one piece per model request."""
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(message.content[pos:start])
        pos = end
    pieces.append(message.content[pos:])
    return pieces


def piece_texts(
    message: ChatMessage, steps: list[Step], spans: list[tuple[int, int]]
) -> list[list[str]]:
    """The model's steps of a message, per piece: those found in the text, in order, and its
    server-side thinking in the first piece. Steps not written as they read (a structured
    tool call) are not located and not checked."""
    per_piece: list[list[str]] = [[] for _ in range(len(spans) + 1)]
    ends = [start for start, _ in spans]
    pos = 0
    for step in steps:
        if step.source != "model":
            continue
        if message.thinking and step.kind == "think" and step.text == message.thinking:
            per_piece[0].insert(0, step.text)
            continue
        at = _find_outside(message.content, step.text, pos, spans)
        if at < 0:
            continue
        pos = at + len(step.text)
        per_piece[sum(at >= e for e in ends)].append(step.text)
    return per_piece


def _find_outside(text: str, sub: str, pos: int, spans: list[tuple[int, int]]) -> int:
    """The first ``sub`` in ``text`` from ``pos`` that lies in no span (-1: none)."""
    at = text.find(sub, pos)
    while at >= 0:
        inside = next((end for start, end in spans if at < end and at + len(sub) > start), None)
        if inside is None:
            return at
        at = text.find(sub, inside)
    return at


def found_in_order(decoded: list[str], texts: Sequence[str]) -> str | None:
    """The first of ``texts`` not found, in order, in the decoded runs (None: all found)."""
    joined = _RUN_GAP.join(decoded)
    pos = 0
    for text in texts:
        at = joined.find(text, pos)
        if at < 0:
            return text
        pos = at + len(text)
    return None


def model_runs(ids: list[int], model: npt.NDArray[np.bool_]) -> list[list[int]]:
    """The runs of consecutive ids the model sampled (``model`` marks them)."""
    edges = np.flatnonzero(np.diff(model, prepend=False, append=False))
    return [ids[a:b] for a, b in zip(edges[::2], edges[1::2], strict=True)]


def check_text(
    ids: list[int], model: npt.NDArray[np.bool_], texts: Sequence[str], decode: Decoder
) -> str | None:
    """Why the model-sampled ids do not decode to the model's text, or None."""
    if not model.any():
        return "no model-sampled token"
    missing = found_in_order([decode(run) for run in model_runs(ids, model)], texts)
    if missing is None:
        return None
    shown = missing if len(missing) <= 40 else missing[:37] + "..."
    return f"the model's text {shown!r} is not in the decoded ids"


class _TokenTable(dict[int, bytes]):
    def __missing__(self, key: int) -> bytes:
        return UNKNOWN.encode()


def trace_decoder(trace: Trace) -> Decoder:
    """Decode ids through the token texts the backend returned with each logprob (an id it
    did not return reads as U+FFFD)."""
    table = _TokenTable()
    for turn in trace.logprobs:
        for token in turn.tokens:
            if token.id is not None:
                table[token.id] = bytes(token.bytes) if token.bytes else token.token.encode()

    def decode(ids: Sequence[int]) -> str:
        return b"".join(map(table.__getitem__, ids)).decode(errors="replace")

    return decode


# ---------------------------------------------------------------- requests


def exact_requests(trace: Trace) -> list[ModelRequest] | None:
    """The trace's own ids, one request per model request; None when some assistant message
    has none (the backend returned no ids)."""
    by_message: dict[int, list[int]] = defaultdict(list)
    for k, request in enumerate(trace.token_requests):
        by_message[request.message_index].append(k)
    assistant = [i for i, m in enumerate(trace.messages) if m.role == "assistant"]
    if not trace.token_requests or any(i not in by_message for i in assistant):
        return None
    if any(i not in assistant for i in by_message):
        raise Skipped(LAYOUT, "token ids point at a message the model did not write")
    steps = steps_by_message(trace)
    texts: dict[int, list[tuple[str, ...]]] = {}
    for i, ks in by_message.items():
        message = trace.messages[i]
        spans = system_spans(message, steps[i])
        per_piece = piece_texts(message, steps[i], spans)
        pieces = model_pieces(message, spans)
        while len(pieces) > len(ks) and not pieces[-1]:
            pieces.pop()
            per_piece.pop()
        if len(pieces) != len(ks):
            raise Skipped(LAYOUT, f"{len(ks)} requests wrote {len(pieces)} model pieces")
        texts[i] = [tuple(t) for t in per_piece]
    taken: dict[int, int] = defaultdict(int)
    requests = []
    for request in trace.token_requests:
        j = taken[request.message_index]
        taken[request.message_index] += 1
        requests.append(
            ModelRequest(
                message_index=request.message_index,
                prompt_ids=request.prompt_ids,
                completion_ids=request.completion_ids,
                logprobs=request.logprobs,
                texts=texts[request.message_index][j],
            )
        )
    return requests


def _template_message(message: ChatMessage) -> Message:
    content = message.content
    if message.thinking:
        content = THINK.format(message.thinking) + content
    row: Message = {"role": message.role, "content": content}
    if message.tool_calls:
        row["tool_calls"] = [
            {
                "id": call.id or f"call_{k}",
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for k, call in enumerate(message.tool_calls)
        ]
    if message.role == "tool" and message.tool_name:
        row["name"] = message.tool_name
    return row


def template_messages(trace: Trace) -> list[Message]:
    """The trace's messages as a chat template reads them (thinking put back in the text)."""
    return [_template_message(m) for m in trace.messages]


def _tools(trace: Trace) -> list[dict[str, Any]] | None:
    """The tools the model was offered (native-tools' python tool)."""
    if trace.mode != "native-tools":
        return None
    from tracegen.modes.native_tools import PYTHON_TOOL

    return [PYTHON_TOOL]


@dataclass
class _Encoder:
    """Ids of growing text: a prompt that extends the previous prompt and completion reuses
    their ids and encodes only the rest, as a server continuing a conversation would."""

    tokenizer: Tokenizer
    text: str = ""
    ids: list[int] = field(default_factory=list)

    def prompt(self, text: str) -> list[int]:
        if self.text and text.startswith(self.text):
            ids = self.ids + self.tokenizer.encode(text[len(self.text) :])
        else:
            ids = self.tokenizer.encode(text)
        self.text, self.ids = text, ids
        return ids

    def completion(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text)
        self.text, self.ids = self.text + text, self.ids + ids
        return ids


def _closing(tokenizer: Tokenizer, rendered: str, head: str, message: ChatMessage) -> str:
    """What the template writes after an assistant message's content that the model wrote:
    its tool calls (in the family's own syntax), and the end-of-turn token when that is the
    EOS. The content is looked for after whatever the template writes before it (Qwen3's empty
    ``<think>`` block, a harmony channel header), so the calls are trained on there too."""
    at = rendered.find(head) if head else 0
    if at < 0:
        return ""
    tail = rendered[at + len(head) :]
    eos = tokenizer.eos_token
    at = tail.find(eos) if eos else -1
    if at >= 0:
        return tail[: at + len(eos or "")]
    return tail.rstrip() if message.tool_calls else ""


def retokenized_requests(trace: Trace, tokenizer: Tokenizer) -> list[ModelRequest]:
    """Model requests rebuilt from the messages with ``tokenizer`` (see the module docstring)."""
    messages = template_messages(trace)
    tools = _tools(trace)
    steps = steps_by_message(trace)
    encoder = _Encoder(tokenizer)
    requests: list[ModelRequest] = []
    for i, message in enumerate(trace.messages):
        if message.role != "assistant":
            continue
        base = tokenizer.render(messages[:i], add_generation_prompt=True, tools=tools)
        full = tokenizer.render(messages[: i + 1], add_generation_prompt=False, tools=tools)
        head = str(messages[i]["content"])
        closing = ""
        if full.startswith(base):
            closing = _closing(tokenizer, full[len(base) :], head, message)
        spans = system_spans(message, steps[i])
        pieces = model_pieces(message, spans)
        texts = piece_texts(message, steps[i], spans)
        if message.thinking:
            pieces[0] = THINK.format(message.thinking) + pieces[0]
        written = base
        for j, piece in enumerate(pieces):
            last = j == len(pieces) - 1
            if last and spans and not piece:
                break
            completion = piece + (closing if last else "")
            prompt_ids = encoder.prompt(written)
            completion_ids = encoder.completion(completion)
            requests.append(ModelRequest(i, prompt_ids, completion_ids, None, tuple(texts[j])))
            if not last:
                start, end = spans[j]
                written += piece + message.content[start:end]
    return requests


# ---------------------------------------------------------------- sequences


def _single(request: ModelRequest, turn: int | None) -> TokenSequence:
    sequence = TokenSequence(prompt_ids=list(request.prompt_ids), turn=turn)
    sequence.add(request.completion_ids, True, request.logprobs)
    sequence.texts += request.texts
    return sequence


def chain(requests: list[ModelRequest]) -> TokenSequence | None:
    """The requests as one sequence, or None when a prompt does not extend the previous
    prompt and completion exactly."""
    sequence = _single(requests[0], None)
    seen = requests[0].prompt_ids + requests[0].completion_ids
    for request in requests[1:]:
        n = len(seen)
        if len(request.prompt_ids) < n or request.prompt_ids[:n] != seen:
            return None
        between = request.prompt_ids[n:]
        sequence.add(between, False, [0.0] * len(between))
        sequence.add(request.completion_ids, True, request.logprobs)
        sequence.texts += request.texts
        seen = request.prompt_ids + request.completion_ids
    return sequence


def token_episode(
    trace: Trace, tokenizer: Tokenizer | None, *, require_exact: bool
) -> TokenEpisode:
    """The sequences of ``trace``: its exact ids where it has them, else its text tokenized
    with ``tokenizer``. `Skipped` when it cannot or may not be exported; `ConfigError` when
    it has no ids and no tokenizer was given."""
    requests = exact_requests(trace)
    source: TokenSource = "exact"
    if requests is None:
        if require_exact:
            raise Skipped(NOT_EXACT)
        if tokenizer is None:
            raise ConfigError(
                f"trace {trace.id} has no token ids (its backend returned none): pass "
                "--tokenizer PATH to tokenize its text, or --require-exact to skip such traces"
            )
        requests = retokenized_requests(trace, tokenizer)
        source = "retokenized"
    if not requests:
        raise Skipped(LAYOUT, "no model request")
    decode = tokenizer.decode if tokenizer is not None else trace_decoder(trace)
    whole = chain(requests) if len(requests) > 1 else _single(requests[0], None)
    if whole is not None:
        return TokenEpisode(source, [whole], False, decode)
    singles = [_single(r, k) for k, r in enumerate(requests)]
    return TokenEpisode(source, singles, True, decode)
