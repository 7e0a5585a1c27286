"""The OpenAI-compatible servers tracegen knows, how to recognise each, and what each can give.

Every one answers ``GET /v1/models`` and ``POST /v1/chat/completions``; each has its own
way to say who it is (tried in this order, on the server's root, not under ``/v1``):

==========  ==========================  ===============================================
server      identity                    what tracegen gets beyond chat completions
==========  ==========================  ===============================================
llama.cpp   ``/props`` (``build_info``)  exact token ids through ``/apply-template``,
                                        ``/tokenize`` and ``/completion``; ``raw``,
                                        ``continue`` and ``prefill`` continuation;
                                        a GBNF grammar (``grammar``)
SGLang      ``/server_info`` (newer),    ``continue`` continuation; a grammar
            ``/get_server_info``         (``ebnf``)
vLLM        ``/version``                 token ids (``return_token_ids``); ``continue``;
                                        a grammar (``structured_outputs.grammar`` from
                                        0.10.2, ``guided_grammar`` before)
LM Studio   ``/api/v0/models``           nothing more: no continuation, no grammar
==========  ==========================  ===============================================

Grammars are sent in GBNF, which llama.cpp reads and xgrammar (vLLM's and SGLang's default
structured-output backend) reads as its EBNF. Sources: llama.cpp ``tools/server/README.md`` @
00dc8057 and ``xllamacpp`` 2026.10 (its server, measured); vLLM
``vllm/entrypoints/openai/chat_completion/protocol.py`` @ d5dba2d7 (``return_token_ids``,
``continue_final_message``) and ``docs/features/structured_outputs.md`` (``guided_*`` fields
deprecated in 0.10.2 for ``structured_outputs``, removed in 0.12.0); SGLang ``http_server.py``
(``/get_server_info`` returns the server arguments and ``version``) and its structured-outputs
guide (``ebnf`` beside ``regex`` and ``json_schema`` in a request).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tracegen.llm.base import Capabilities
from tracegen.llm.grammar import Grammar

TokenIds = Literal["none", "vllm", "llamacpp"]
Recogniser = Callable[[dict[str, Any]], "str | None"]
"""The server's version if an answer at its probe path is that server's, else None."""
GrammarFields = Callable[[Grammar, str], dict[str, Any]]
"""The request fields that constrain decoding to a grammar, given the server's version."""


@dataclass(frozen=True)
class Flavor:
    """One kind of OpenAI-compatible server. ``probes``: where it says who it is, read by
    ``recognise``. ``extensions``: it takes vLLM-style extra request fields (``top_k``,
    ``chat_template_kwargs``) that OpenAI's own API refuses. ``token_ids``: how exact token
    ids are had. ``least_top_logprobs``: the fewest alternatives to ask for with logprobs
    (llama.cpp gives no logprobs for ``top_logprobs: 0``, and twenty alternatives a token
    without it). ``grammar``: the fields that carry a grammar (``capabilities.grammar`` says
    it takes one)."""

    kind: str
    name: str
    capabilities: Capabilities
    probes: tuple[str, ...] = ()
    recognise: Recogniser = lambda data: None
    extensions: bool = True
    token_ids: TokenIds = "none"
    least_top_logprobs: int = 0
    grammar: GrammarFields | None = None


def _llamacpp(data: dict[str, Any]) -> str | None:
    found = "default_generation_settings" in data or "build_info" in data
    return str(data.get("build_info", "")) if found else None


def _sglang(data: dict[str, Any]) -> str | None:
    version = data.get("version")
    return version if isinstance(version, str) and "model_path" in data else None


def _vllm(data: dict[str, Any]) -> str | None:
    version = data.get("version")
    return version if isinstance(version, str) else None


def _lmstudio(data: dict[str, Any]) -> str | None:
    return "" if isinstance(data.get("data"), list) else None


VLLM_STRUCTURED_OUTPUTS = (0, 10, 2)
"""The vLLM release that takes ``structured_outputs`` (older ones ignore it: ``guided_grammar``)."""


def _release(version: str) -> tuple[int, ...]:
    """``0.10.2`` → (0, 10, 2), reading the leading digits of each part (``0.11.0rc1+cu128``)."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _vllm_grammar(grammar: Grammar, version: str) -> dict[str, Any]:
    release = _release(version)
    if release and release < VLLM_STRUCTURED_OUTPUTS:
        return {"guided_grammar": grammar.gbnf}
    return {"structured_outputs": {"grammar": grammar.gbnf}}


LLAMACPP = Flavor(
    "llamacpp",
    "llama.cpp",
    Capabilities(
        token_ids=True,
        continuation=("raw", "continue", "prefill"),
        thinking=True,
        grammar=True,
        logprobs_kind="raw",
        processed_logprobs=True,
    ),
    probes=("/props",),
    recognise=_llamacpp,
    token_ids="llamacpp",
    least_top_logprobs=1,
    grammar=lambda grammar, version: {"grammar": grammar.gbnf},
)
SGLANG = Flavor(
    "sglang",
    "SGLang",
    Capabilities(continuation=("continue",), thinking=True, grammar=True),
    probes=("/server_info", "/get_server_info"),
    recognise=_sglang,
    grammar=lambda grammar, version: {"ebnf": grammar.gbnf},
)
VLLM = Flavor(
    "vllm",
    "vLLM",
    Capabilities(token_ids=True, continuation=("continue",), thinking=True, grammar=True),
    probes=("/version",),
    recognise=_vllm,
    token_ids="vllm",
    grammar=_vllm_grammar,
)
LMSTUDIO = Flavor(
    "lmstudio",
    "LM Studio",
    Capabilities(thinking=True),
    probes=("/api/v0/models",),
    recognise=_lmstudio,
)
GENERIC = Flavor("openai", "an OpenAI-compatible server", Capabilities(), extensions=False)
FLAVORS = {f.kind: f for f in (LLAMACPP, SGLANG, VLLM, LMSTUDIO, GENERIC)}
"""By kind, in the order servers are asked who they are (the generic one last: any server
answering ``/v1/models``)."""
