"""The tokenizer behind ``--tokenizer PATH``: a local Hugging Face tokenizer or a GGUF file.

- A directory (or its ``tokenizer.json``/``tokenizer_config.json``): the ``tokenizers``
  library and the directory's chat template, rendered as ``transformers`` renders it (the
  template TRL's ``SFTTrainer`` would apply); nothing is downloaded.
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
import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

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


def _environment() -> Any:
    """The Jinja environment ``transformers``' ``apply_chat_template`` renders in."""
    from jinja2 import TemplateError, nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.parser import Parser
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """``{% generation %}…{% endgeneration %}`` (training templates' assistant markers),
        rendered as its body."""

        tags = {"generation"}  # noqa: RUF012 (jinja reads it as a set)

        def parse(self, parser: Parser) -> nodes.Node:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body).set_lineno(lineno)

    def tojson(
        value: Any, ensure_ascii: bool = False, indent: int | None = None, sort_keys: bool = False
    ) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys)

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation]
    )
    env.filters["tojson"] = tojson
    env.globals |= {"raise_exception": raise_exception, "strftime_now": strftime_now}
    return env


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    value = orjson.loads(path.read_bytes())
    return value if isinstance(value, dict) else {}


def _token_text(value: Any) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: a string or ``{"content": …}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class HfTokenizer:
    """A Hugging Face tokenizer directory: ``tokenizer.json`` through ``tokenizers`` and the
    chat template of ``tokenizer_config.json`` (or ``chat_template.jinja``) through Jinja, in
    the environment ``transformers``' ``apply_chat_template`` sets up (sandboxed,
    ``trim_blocks``/``lstrip_blocks``, loop controls, ``tojson``, ``raise_exception``,
    ``strftime_now``, the special tokens as variables) — without importing ``transformers``
    (and torch), which costs seconds."""

    def __init__(self, path: Path) -> None:
        try:
            from jinja2 import TemplateError
            from tokenizers import Tokenizer as Backend
        except ImportError:
            raise MissingExtraError(
                f"{path}: a Hugging Face tokenizer needs tokenizers and jinja2: "
                "pip install 'tracegen[tokenize]'"
            ) from None
        if not (path / "tokenizer.json").is_file():
            raise ConfigError(f"{path}: no tokenizer.json (a Hugging Face tokenizer directory)")
        try:
            self._tok = Backend.from_file(str(path / "tokenizer.json"))
            config = _json(path / "special_tokens_map.json") | _json(path / "tokenizer_config.json")
        except Exception as e:
            raise ConfigError(f"{path}: cannot read the tokenizer ({e})") from None
        template = config.get("chat_template")
        if (path / "chat_template.jinja").is_file():
            template = (path / "chat_template.jinja").read_text()
        if isinstance(template, list):
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        if not isinstance(template, str):
            raise ConfigError(f"{path}: the tokenizer has no chat template")
        self._specials = {
            name: _token_text(config.get(name))
            for name in ("bos_token", "eos_token", "unk_token", "pad_token")
        }
        self.eos_token = self._specials["eos_token"]
        self._path = path
        try:
            self._template = _environment().from_string(template)
        except TemplateError as e:
            raise ConfigError(f"{path}: the chat template does not parse ({e})") from None

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def render(
        self,
        messages: list[Message],
        *,
        add_generation_prompt: bool,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        from jinja2 import TemplateError

        try:
            rendered = self._template.render(
                messages=messages,
                tools=tools,
                add_generation_prompt=add_generation_prompt,
                **self._specials,
            )
        except TemplateError as e:
            raise ConfigError(f"{self._path}: the chat template failed: {e}") from None
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
