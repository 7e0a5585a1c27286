"""The tokenizer behind ``--tokenizer PATH``: a local Hugging Face tokenizer or a GGUF file.

- A directory (or its ``tokenizer.json``/``tokenizer_config.json``): ``transformers``'
  ``AutoTokenizer``, offline (``local_files_only``), whose chat template is the one TRL's
  ``SFTTrainer`` would apply.
- A ``.gguf`` file: llama.cpp's own tokenizer and chat template, run in process by
  ``xllamacpp``. The file's vocabulary could also be rebuilt as a Hugging Face tokenizer
  (``transformers`` does it with the ``gguf`` package), but that copy guesses the
  pre-tokenizer from ``tokenizer.ggml.pre`` and falls back to GPT-2's split for names it does
  not know (SmolLM2's ``smollm`` is one), and reading a 49k-token vocabulary with ``gguf``
  took 15-30 s here. llama.cpp is the code that produced the ids of every llama.cpp backend,
  so its ``/tokenize``, ``/detokenize`` and ``/apply-template`` are right by construction; it
  loads the weights too (4 s for SmolLM2-135M here), which is the price.

Both parse special tokens written in text (``<|im_end|>``) and add no BOS of their own: a chat
template writes its BOS itself.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracegen.errors import ConfigError, MissingExtraError

if TYPE_CHECKING:
    from collections.abc import Sequence

Message = dict[str, Any]


class Tokenizer(Protocol):
    """Text ⇄ ids and chat rendering, the way the model's server does them."""

    eos_token: str | None
    """The end-of-sequence token's text (``<|im_end|>`` for ChatML models), if known."""

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; special tokens written in it are parsed; no BOS added."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens included."""
        ...

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        """``messages`` through the chat template, as text."""
        ...

    def close(self) -> None: ...


class HfTokenizer:
    """A local Hugging Face tokenizer directory, through ``transformers``."""

    def __init__(self, path: Path) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise MissingExtraError(
                f"{path}: a Hugging Face tokenizer needs transformers: "
                "pip install 'tracegen[tokenize]'"
            ) from None
        try:
            self._tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(f"{path}: not a tokenizer directory ({first})") from None
        if not getattr(self._tok, "chat_template", None):
            raise ConfigError(f"{path}: the tokenizer has no chat template")
        self.eos_token: str | None = self._tok.eos_token

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        rendered = self._tok.apply_chat_template(
            messages,
            tools=list(tools) if tools else None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
        )
        return str(rendered)

    def close(self) -> None:
        pass


class LlamaCppTokenizer:
    """A GGUF file's tokenizer and chat template, through llama.cpp in process (xllamacpp)."""

    def __init__(self, path: Path) -> None:
        try:
            import xllamacpp
        except ImportError:
            raise MissingExtraError(
                f"{path}: a GGUF tokenizer needs xllamacpp: pip install xllamacpp"
            ) from None
        import httpx

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = 512
        params.n_parallel = 1
        params.warmup = False
        params.prefill_assistant = False
        params.verbosity = -1
        try:
            self._server = xllamacpp.Server(params)
        except (RuntimeError, ValueError) as e:
            raise ConfigError(f"{path}: llama.cpp cannot load it ({e})") from None
        self._http = httpx.Client(base_url=self._server.listening_address, timeout=120)
        self.eos_token = self._get("/props").get("eos_token") or None

    def _get(self, path: str) -> dict[str, Any]:
        response = self._http.get(path)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._http.post(path, json=body)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def encode(self, text: str) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": True}
        return [int(t) for t in self._post("/tokenize", body)["tokens"]]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._post("/detokenize", {"tokens": list(ids)})["content"])

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        body: dict[str, Any] = {
            "messages": messages,
            "add_generation_prompt": add_generation_prompt,
        }
        if tools:
            body["tools"] = tools
        return str(self._post("/apply-template", body)["prompt"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._http.close()
        self._server = None


def load_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer at ``path``: a ``.gguf`` file, or a Hugging Face tokenizer directory."""
    if not path.exists():
        raise ConfigError(f"{path}: no such tokenizer (a Hugging Face directory or a .gguf file)")
    if path.is_file() and path.suffix == ".gguf":
        return LlamaCppTokenizer(path)
    if path.is_file() and path.name in ("tokenizer.json", "tokenizer_config.json"):
        path = path.parent
    if not path.is_dir():
        raise ConfigError(f"{path}: expected a Hugging Face tokenizer directory or a .gguf file")
    return HfTokenizer(path)
