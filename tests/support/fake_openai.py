"""A loopback OpenAI-compatible server for tests: real HTTP on 127.0.0.1, four flavours, each
answer sent whole (``stream: false``).

Wire format followed: vLLM ``vllm/entrypoints/openai/chat_completion/protocol.py`` @ d5dba2d7
(``ChatCompletionRequest``: ``continue_final_message`` with ``add_generation_prompt`` both true
is a 400, ``stream_options`` without ``stream`` is a 400; ``ChatCompletionResponse``: every
``ChatMessage`` field, unset ones null, ``reasoning``, ``tool_calls`` an empty list when none;
``return_token_ids`` fills the top-level ``prompt_token_ids`` and the choice's ``token_ids``,
``return_tokens_as_token_ids`` makes logprob tokens ``token_id:N`` with the text's bytes, the
alternatives with their own) and ``chat_completion/serving.py`` @ 006c49d4
(``chat_completion_full_generator``; a failed generation is an error status with an
``{"error"}`` body); llama.cpp ``tools/server/README.md`` @ 00dc8057 and its server in
``xllamacpp`` 2026.10, measured (``/props``, ``/apply-template``, ``/tokenize``, ``/detokenize``
(special tokens written out); ``/completion``
with ``return_tokens`` and ``n_probs``: ``tokens`` holds every sampled id, the ones holding a
stop string and the end of turn included, ``completion_probabilities`` leaves out as many
entries as the stop string has tokens, ``stop_type`` ``eos``/``limit``/``word``,
``stopping_word``, ``tokens_predicted``, ``tokens_evaluated``, ``timings``; chat: a trailing
assistant message is left open, ``reasoning_content``, ``id`` in every logprob entry and
alternative, 20 alternatives when ``logprobs`` comes without ``top_logprobs`` and no logprobs
with ``top_logprobs: 0``, ``timings``, no ``logprobs`` field unless asked, ``stream_options``
accepted; errors ``{"error": {"code", "message", "type"}}``); SGLang ``http_server.py``
(``/get_server_info``, newer ``/server_info``: server arguments and ``version``;
``reasoning_content``, ``matched_stop``); LM Studio's ``/api/v0/models``. OpenAI's
chat-completions reference for the rest (``usage``; ``content`` null beside tool calls, whose
``arguments`` are a JSON string).

The scripted model, faults and pseudo-tokens are `tests.support.fake_model`'s, shared with the
Ollama stand-in. A fault takes the answer's place: ``drop`` closes the connection halfway
through the body, ``error_line`` is the error status (500 unless given) servers answer when
generating fails, ``malformed`` a body cut short, ``wire`` bytes `tests.support.hostile_wire`
makes of it; ``status`` and ``stall`` are served before generating. Each rendered prompt is
kept in ``prompts`` (what the model was given), so a test can prove there is no end-of-turn
inside a continued message. Simplifications: one choice; no streaming (``stream: true`` is a
400, as tracegen never streams); the chat template is ChatML-like; ``lmstudio`` closes a
trailing assistant message (it offers no continuation); only the generation endpoints take
faults, latency and ``parallel``.
A grammar is taken only in the field its server reads (`grammar_field`; vLLM's depends on its
version): any other is a 400, so a grammar sent where a real server would ignore it (and decode
unconstrained) fails loudly.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from tests.support.fake_model import (
    END_OF_TURN,
    STATUS_MESSAGES,
    FakeModel,
    Fault,
    Handler,
    Reply,
    cut,
    logprob_entry,
    render_chat,
    sampled_pieces,
    tokenize,
)
from tests.support.hostile_wire import misbehave

FLAVORS = ("vllm", "sglang", "llamacpp", "lmstudio")
N_VOCAB = 151_936
"""The vocabulary size llama.cpp's stand-in reports (Qwen's); its pseudo-token ids stay below."""
REASONING_FIELD = {
    "vllm": "reasoning",
    "sglang": "reasoning_content",
    "llamacpp": "reasoning_content",
    "lmstudio": "reasoning_content",
}
VERSIONS = {"vllm": "0.11.2", "sglang": "0.5.4", "llamacpp": "b6900-abc1234", "lmstudio": ""}
JSON = "application/json; charset=utf-8"
MAX_LOGPROBS = 20
"""vLLM's ``--max-logprobs`` default."""
LLAMACPP_ALTERNATIVES = 20
"""The alternatives llama.cpp's chat gives each token when ``logprobs`` comes without
``top_logprobs`` (measured; with ``top_logprobs: 0`` it gives no logprobs)."""
GRAMMAR_FIELDS = ("grammar", "ebnf", "structured_outputs", "guided_grammar")
"""Where each server reads a grammar: llama.cpp ``grammar`` (GBNF), SGLang ``ebnf``, vLLM
``structured_outputs.grammar`` from 0.10.2 and ``guided_grammar`` before (removed in 0.12)."""


def grammar_field(flavor: str, version: str) -> str | None:
    """The one field a server of ``flavor`` and ``version`` reads a grammar from."""
    if flavor == "vllm":
        release = tuple(int(p) for p in version.split(".")[:3])
        return "structured_outputs" if release >= (0, 10, 2) else "guided_grammar"
    return {"llamacpp": "grammar", "sglang": "ebnf"}.get(flavor)


def grammar_sent(body: dict[str, Any]) -> str | None:
    """The grammar text a request carries, in whichever field."""
    outputs = body.get("structured_outputs")
    if isinstance(outputs, dict):
        return outputs.get("grammar")
    return next((body[k] for k in ("grammar", "ebnf", "guided_grammar") if k in body), None)


class _Handler(Handler):
    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake  # type: ignore[return-value]

    # ------------------------------------------------------------ errors

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        if self.fake.flavor == "lmstudio":
            body: Any = {"error": message}
        else:
            kind = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError"}
            body = {"error": {"message": message, "type": kind.get(status, "InternalServerError")}}
            body["error"]["code"] = status
        self.send_json(status, body, headers)

    def _not_found(self) -> None:
        if self.fake.flavor in ("vllm", "sglang"):
            self.send_json(404, {"detail": "Not Found"})
        else:
            self._error(404, "File Not Found")

    def _authorized(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Invalid API Key")
        return False

    # ------------------------------------------------------------ routes

    def do_GET(self) -> None:
        fake = self.fake
        fake.record(self.path, {}, self.headers_seen())
        if not self._authorized():
            return
        flavor, version = fake.flavor, fake.version
        name = next(iter(fake.models), "")
        if self.path == "/v1/models":
            data = [{"id": n, "object": "model", "owned_by": flavor} for n in fake.models]
            if flavor == "llamacpp":  # tools/server/server.cpp, handle_models: the model's meta
                for entry in data:
                    entry["meta"] = {"vocab_type": 2, "n_vocab": N_VOCAB, "n_ctx_train": 4096}
            self.send_json(200, {"object": "list", "data": data})
        elif flavor == "vllm" and self.path == "/version":
            self.send_json(200, {"version": version})
        elif flavor == "vllm" and self.path.startswith("/server_info") and fake.logprobs_mode:
            # Served only with VLLM_SERVER_DEV_MODE=1; its config as TRL 1.16 reads it
            # (``trl/generation/vllm_client.py``, ``get_server_info``).
            model_config = {"model": name, "logprobs_mode": fake.logprobs_mode}
            self.send_json(200, {"vllm_config": {"model_config": model_config}})
        elif flavor == "sglang" and self.path in ("/server_info", "/get_server_info"):
            self.send_json(200, {"model_path": name, "tp_size": 1, "version": version})
        elif flavor == "llamacpp" and self.path == "/props":
            self.send_json(
                200,
                {
                    "default_generation_settings": {"n_ctx": 4096, "params": {}},
                    "total_slots": 1,
                    "model_path": f"/models/{name}.gguf",
                    "chat_template": "{{ chatml }}",
                    "build_info": version,
                },
            )
        elif flavor == "lmstudio" and self.path == "/api/v0/models":
            data = [
                {"id": n, "object": "model", "type": "llm", "state": "loaded"} for n in fake.models
            ]
            self.send_json(200, {"object": "list", "data": data})
        elif self.path == "/health" and flavor in ("vllm", "sglang", "llamacpp"):
            self.send_json(200, {"status": "ok"})
        else:
            self._not_found()

    def do_POST(self) -> None:
        fake = self.fake
        body = self.read_body()
        fake.record(self.path, body or {}, self.headers_seen())
        if not self._authorized():
            return
        native = fake.flavor == "llamacpp"
        if body is None:
            self._error(400, "invalid request body: not a JSON object")
        elif self.path == "/v1/chat/completions":
            with fake.serving():
                self._chat(body)
        elif native and self.path == "/completion":
            with fake.serving():
                self._completion(body)
        elif native and self.path == "/apply-template":
            self.send_json(200, {"prompt": render_chat(body.get("messages") or [])})
        elif native and self.path == "/tokenize":
            self.send_json(200, {"tokens": fake.vocab.encode(str(body.get("content", "")))})
        elif native and self.path == "/detokenize":
            self.send_json(200, {"content": fake.vocab.decode(body.get("tokens") or [])})
        else:
            self._not_found()

    # ------------------------------------------------------------ chat completions

    def _problem(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """What a strict server refuses before generating, as (status, message)."""
        fake = self.fake
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, "Expected 'messages' to be a non-empty array"
        if not fake.single_model() and fake.resolve(body.get("model")) is None:
            return 404, f"The model `{body.get('model')}` does not exist."
        if body.get("stream"):
            return 400, "this stand-in answers only non-streamed requests"
        if body.get("stream_options") and fake.flavor != "llamacpp":
            return 400, "Stream options can only be defined when `stream=True`."
        top = body.get("top_logprobs")
        if top is not None and (not isinstance(top, int) or top < 0):
            return 400, "`top_logprobs` must be a positive value."
        if top and not body.get("logprobs"):
            return 400, "when using `top_logprobs`, `logprobs` must be set to true."
        if top and top > MAX_LOGPROBS:
            return 400, f"Requested top logprobs of {top} exceeds maximum of {MAX_LOGPROBS}"
        if "stop" in body and not isinstance(body["stop"], list | str):
            return 400, "stop must be a string or a list of strings"
        continuing = body.get("continue_final_message")
        if continuing and body.get("add_generation_prompt"):
            return 400, (
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
            )
        if continuing and fake.flavor == "lmstudio":
            return 400, "Unrecognized key in request: continue_final_message"
        if continuing and messages[-1].get("role") != "assistant":
            return 400, "continue_final_message needs the final message to be the assistant's"
        return self._grammar_problem(body)

    def _grammar_problem(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """A grammar in a field this server does not read (strict: a real one would ignore it
        and decode unconstrained), or one that is not GBNF text."""
        taken = grammar_field(self.fake.flavor, self.fake.version)
        for key in GRAMMAR_FIELDS:
            if key in body and key != taken:
                return 400, f"Unrecognized key in request: {key}"
        text = grammar_sent(body)
        if taken in body and not (isinstance(text, str) and "root ::=" in text):
            return 400, f"{taken} holds no grammar: {str(body[taken])[:80]}"
        return None

    def _render(self, body: dict[str, Any]) -> str:
        """The prompt the model is given: a trailing assistant message stays open with
        ``continue_final_message``, or always on llama.cpp (prefill)."""
        open_last = bool(body.get("continue_final_message")) or self.fake.flavor == "llamacpp"
        return render_chat(body["messages"], open_last=open_last)

    def _fault_or_reply(
        self, path: str, body: dict[str, Any], problem: tuple[int, str] | None
    ) -> tuple[Reply, Fault | None] | None:
        fake = self.fake
        fault = fake.take_fault()
        if fault is not None and fault.kind == "status":
            status = fault.status or 503
            message = fault.message or STATUS_MESSAGES.get(status, "error")
            headers = {"Retry-After": f"{fault.seconds:g}"} if fault.seconds is not None else None
            self._error(status, message, headers)
            return None
        if problem is not None:
            self._error(*problem)
            return None
        reply = fake.reply(path, body)
        if reply is None:
            self._error(500, fake.no_reply_message())
            return None
        return reply, fault

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.fake
        problem = self._problem(body)
        prompt = self._render(body) if problem is None else ""
        answered = self._fault_or_reply(self.path, body, problem)
        if answered is None:
            return
        reply, fault = answered
        fake.prompts.append(prompt)
        self._answer(self._chat_completion(body, reply, prompt), fault)

    def _answer(self, whole: dict[str, Any], fault: Fault | None) -> None:
        """The whole answer, or in its place the fault: the connection dropped halfway through
        the body, the error status these servers answer when generating fails, or a body cut
        short (a complete response that is not JSON)."""
        data = orjson.dumps(whole)
        if fault is None:
            self.send_bytes(200, data, JSON)
        elif fault.kind == "drop":
            self.send_response(200)
            self.send_header("Content-Type", JSON)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.drop()
        elif fault.kind == "error_line":
            self._error(fault.status or 500, fault.message or STATUS_MESSAGES[500])
        elif fault.kind == "wire":
            misbehave(self, data, fault)
        else:
            self.send_bytes(200, data[: len(data) // 2], JSON)

    def _chat_completion(self, body: dict[str, Any], reply: Reply, prompt: str) -> dict[str, Any]:
        """One ``chat.completion`` object, with each flavour's own fields."""
        fake, flavor = self.fake, self.fake.flavor
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        content, cut_reason = cut(reply.content, stops, limit)
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = reply.thinking if kwargs.get("enable_thinking") is not False else ""
        tokens = tokenize(thinking) + tokenize(content)
        ids = [fake.vocab.id(t) for t in tokens]
        calls = [_tool_call(i, c, flavor) for i, c in enumerate(reply.tool_calls or [])]
        message = _message(flavor, content, thinking, calls)
        finish = cut_reason or reply.done_reason or ("tool_calls" if calls else "stop")
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        top = body.get("top_logprobs", LLAMACPP_ALTERNATIVES if flavor == "llamacpp" else 0)
        if body.get("logprobs") and reply.logprobs and (top or flavor != "llamacpp"):
            entries = self._logprobs(body, tokens, ids, int(top or 0))
            choice["logprobs"] = {"content": post_sampling(body, entries)}
        elif flavor != "llamacpp":
            choice["logprobs"] = None
        usage: dict[str, Any] = {"prompt_tokens": len(tokenize(prompt))}
        usage["completion_tokens"] = len(tokens)
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        whole: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model"),
            "choices": [choice],
            "usage": usage,
        }
        if flavor == "vllm":
            with_ids = bool(body.get("return_token_ids"))
            choice.update(stop_reason=None, token_ids=ids if with_ids else None)
            whole["prompt_token_ids"] = fake.vocab.encode(prompt) if with_ids else None
            whole.update(prompt_logprobs=None, kv_transfer_params=None, system_fingerprint=None)
        elif flavor == "sglang":
            choice["matched_stop"] = None
        elif flavor == "llamacpp":
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
            whole["timings"] = {"prompt_ms": 2.0, "predicted_ms": 20.0 * len(tokens)}
        return whole

    def _logprobs(
        self, body: dict[str, Any], tokens: list[str], ids: list[int], top: int
    ) -> list[dict[str, Any]]:
        fake = self.fake
        as_text = fake.token_ids_as_text or bool(body.get("return_tokens_as_token_ids"))
        entries = []
        for i, (token, token_id) in enumerate(zip(tokens, ids, strict=True)):
            entry = logprob_entry(token, i, top)
            if fake.flavor == "llamacpp":
                entry["id"] = token_id
                for alt in entry.get("top_logprobs", []):
                    alt["id"] = fake.vocab.id(alt["token"])
            if as_text:
                entry["token"] = f"token_id:{token_id}"
                for alt in entry.get("top_logprobs", []):
                    alt["token"] = f"token_id:{fake.vocab.id(alt['token'])}"
                    alt["bytes"] = list(alt["token"].encode())
            entries.append(entry)
        return entries

    # ------------------------------------------------------------ llama.cpp's /completion

    def _completion(self, body: dict[str, Any]) -> None:
        fake = self.fake
        ids: list[int] = body.get("prompt") or []
        problem = None
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            ids, problem = [], (400, "this stand-in takes the prompt as token ids")
        elif body.get("stream"):
            problem = 400, "this stand-in answers only non-streamed requests"
        prompt = fake.vocab.decode(ids)
        problem = problem or self._grammar_problem(body)
        answered = self._fault_or_reply(self.path, {**body, "prompt": prompt}, problem)
        if answered is None:
            return
        reply, fault = answered
        fake.prompts.append(prompt)
        self._answer(self._completion_answer(body, reply, ids, prompt), fault)

    def _completion_answer(
        self, body: dict[str, Any], reply: Reply, prompt_ids: list[int], prompt: str
    ) -> dict[str, Any]:
        """Every sampled token (``tokens``, with ``return_tokens``): the ones that hold a stop
        string included, or the end-of-turn token when the reply ends; the probabilities of
        the stop string's tokens are left out, as llama.cpp does."""
        fake = self.fake
        stops = [x for x in body.get("stop") or [] if x]
        text, reason = cut(reply.content, stops, body.get("n_predict"), reply.by_character)
        tokens = sampled_pieces(reply.content, reply.by_character)
        matched = ""
        if reason == "stop":
            matched = next(x for x in stops if reply.content.find(x) == len(text))
            sampled: list[str] = []
            covered = 0
            while covered < len(text) + len(matched):
                sampled.append(tokens[len(sampled)])
                covered += len(sampled[-1])
        elif reason == "length":
            sampled = tokens[: len(sampled_pieces(text, reply.by_character))]
        else:
            sampled = [*tokens, END_OF_TURN]
        ids = [fake.vocab.encode(t)[0] for t in sampled]
        n_probs = int(body.get("n_probs") or 0)
        answer: dict[str, Any] = {
            "index": 0,
            "content": text,
            "tokens": ids if body.get("return_tokens") else [],
            "id_slot": 0,
            "stop": True,
            "model": next(iter(fake.models), ""),
            "tokens_predicted": len(sampled),
            "tokens_evaluated": len(prompt_ids),
            "generation_settings": {"n_predict": body.get("n_predict", -1), "stop": stops},
            "prompt": prompt,
            "has_new_line": "\n" in text,
            "truncated": False,
            "stop_type": {"stop": "word", "length": "limit"}.get(reason or "", "eos"),
            "stopping_word": matched,
            "tokens_cached": len(prompt_ids) + len(sampled) - 1,
            "timings": {"prompt_ms": 2.0, "predicted_ms": 20.0 * len(sampled)},
        }
        if n_probs and reply.logprobs:
            probs = []
            for i, (token, token_id) in enumerate(zip(sampled, ids, strict=True)):
                entry = logprob_entry("" if token == END_OF_TURN else token, i, n_probs)
                entry["id"] = token_id
                for alt in entry.get("top_logprobs", []):
                    alt["id"] = fake.vocab.id(alt["token"])
                probs.append(entry)
            stop_tokens = min(len(probs), len(sampled_pieces(matched, reply.by_character)))
            answer["completion_probabilities"] = post_sampling(
                body, probs[: len(probs) - stop_tokens]
            )
        return answer


def post_sampling(body: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` as llama.cpp writes them with ``post_sampling_probs`` (``tools/server/
    server-task.cpp`` ``probs_vector_to_json``): ``prob`` and ``top_probs`` in place of
    ``logprob`` and ``top_logprobs``. The stand-in's sampler keeps the distribution as it is
    but for a temperature of 0.5: each probability is squared and renormalised over the
    alternatives listed."""
    if not body.get("post_sampling_probs"):
        return entries
    out = []
    for entry in entries:
        alts = entry.get("top_logprobs", [])
        weights = [math.exp(2 * a["logprob"]) for a in alts] or [1.0]
        total = sum(weights)
        row = {k: v for k, v in entry.items() if k not in ("logprob", "top_logprobs")}
        row["prob"] = math.exp(2 * entry["logprob"]) / total
        row["top_probs"] = [
            {**{k: v for k, v in a.items() if k != "logprob"}, "prob": w / total}
            for a, w in zip(alts, weights, strict=True)
        ]
        out.append(row)
    return out


def _message(
    flavor: str, content: str, thinking: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The assistant message: ``content`` null beside tool calls; vLLM sends every field of its
    ``ChatMessage`` (the unset ones null), the others only those they have."""
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
    if flavor == "vllm":
        message.update(reasoning=thinking or None, tool_calls=calls, refusal=None)
        message.update(annotations=None, audio=None, function_call=None)
        return message
    if thinking:
        message[REASONING_FIELD[flavor]] = thinking
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_call(index: int, call: dict[str, Any], flavor: str) -> dict[str, Any]:
    """A reply's tool call (Ollama's shape) as these servers send it: an id, and the
    arguments as a JSON string; a broken call is passed on as it is."""
    function = call["function"]
    if not isinstance(function, dict):
        return {"function": function}
    arguments = orjson.dumps(function.get("arguments") or {}).decode()
    called = {"name": function["name"], "arguments": arguments}
    entry = {"id": f"call_{index}", "type": "function", "function": called}
    return {**entry, "index": index} if flavor == "sglang" else entry


class FakeOpenAI(FakeModel):
    """An OpenAI-compatible server of one ``flavor``; see the module docstring.

    ``token_ids_as_text`` is vLLM's ``--return-tokens-as-token-ids``. ``api_key``, when set,
    is required as a bearer token on every request. ``version`` is the one the server reports
    (default: `VERSIONS`); a grammar is read from the field that version reads.
    """

    handler = _Handler

    def __init__(
        self,
        flavor: str = "vllm",
        models: dict[str, list[str]] | None = None,
        parallel: int | None = None,
        latency_s: float = 0.0,
        *,
        token_ids_as_text: bool = False,
        api_key: str | None = None,
        version: str | None = None,
        logprobs_mode: str | None = None,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown flavor {flavor!r}; known: {', '.join(FLAVORS)}")
        super().__init__(models, parallel, latency_s)
        self.flavor = flavor
        self.version = VERSIONS[flavor] if version is None else version
        self.token_ids_as_text = token_ids_as_text
        self.api_key = api_key
        self.logprobs_mode = logprobs_mode
        """vLLM's ``--logprobs-mode``, shown at ``/server_info`` (None: not served there)."""

    def start(self) -> FakeOpenAI:
        super().start()
        return self

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    @property
    def api(self) -> str:
        """The URL users give as ``--host``: the server's ``/v1``."""
        return f"{self.url}/v1"

    def single_model(self) -> bool:
        """llama.cpp and SGLang serve one model whatever name a request gives."""
        return self.flavor in ("llamacpp", "sglang")
