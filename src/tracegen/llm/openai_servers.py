"""The OpenAI-compatible servers tracegen knows, how to recognise each, and what each can give.

Every one answers ``GET /v1/models`` and ``POST /v1/chat/completions``; each has its own
way to say who it is (tried in this order, on the server's root, not under ``/v1``):

==========  ==========================  ===============================================
server      identity                    what tracegen gets beyond chat completions
==========  ==========================  ===============================================
llama.cpp   ``/props`` (``build_info``)  exact token ids through ``/apply-template``,
                                        ``/tokenize`` and ``/completion``; ``raw``,
                                        ``continue`` and ``prefill`` continuation
SGLang      ``/server_info`` (newer),    ``continue`` continuation
            ``/get_server_info``
vLLM        ``/version``                 token ids (``return_token_ids``); ``continue``
LM Studio   ``/api/v0/models``           nothing more: no continuation
==========  ==========================  ===============================================

Sources: llama.cpp ``tools/server/README.md`` @ 00dc8057 and ``xllamacpp`` 2026.10 (its server,
measured); vLLM ``vllm/entrypoints/openai/chat_completion/protocol.py`` @ d5dba2d7
(``return_token_ids``, ``continue_final_message``); SGLang ``http_server.py``
(``/get_server_info`` returns the server arguments and ``version``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tracegen.llm.base import Capabilities

TokenIds = Literal["none", "vllm", "llamacpp"]
Recogniser = Callable[[dict[str, Any]], "str | None"]
"""The server's version if an answer at its probe path is that server's, else None."""


@dataclass(frozen=True)
class Flavor:
    """One kind of OpenAI-compatible server. ``probes``: where it says who it is, read by
    ``recognise``. ``extensions``: it takes vLLM-style extra request fields (``top_k``,
    ``chat_template_kwargs``) that OpenAI's own API refuses. ``token_ids``: how exact token
    ids are had. ``least_top_logprobs``: the fewest alternatives to ask for with logprobs (llama.cpp
    gives no logprobs for ``top_logprobs: 0``, and twenty alternatives a token without it)."""

    kind: str
    name: str
    capabilities: Capabilities
    probes: tuple[str, ...] = ()
    recognise: Recogniser = lambda data: None
    extensions: bool = True
    token_ids: TokenIds = "none"
    least_top_logprobs: int = 0


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


LLAMACPP = Flavor(
    "llamacpp",
    "llama.cpp",
    Capabilities(token_ids=True, continuation=("raw", "continue", "prefill"), thinking=True),
    probes=("/props",),
    recognise=_llamacpp,
    token_ids="llamacpp",
    least_top_logprobs=1,
)
SGLANG = Flavor(
    "sglang",
    "SGLang",
    Capabilities(continuation=("continue",), thinking=True),
    probes=("/server_info", "/get_server_info"),
    recognise=_sglang,
)
VLLM = Flavor(
    "vllm",
    "vLLM",
    Capabilities(token_ids=True, continuation=("continue",), thinking=True),
    probes=("/version",),
    recognise=_vllm,
    token_ids="vllm",
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
