"""The text the model is given: a system prompt per mode (``prompts/<mode>.txt``) and the task."""

from __future__ import annotations

from pathlib import Path

from tracegen.data import data_dir
from tracegen.errors import ConfigError
from tracegen.schema import Problem

MATH_INSTRUCTION = (
    "You may run Python to compute. End your answer with the final number alone on its "
    "last line, as `#### <number>`."
)


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read prompt: {e}") from None
    if not text.strip():
        raise ConfigError(f"{path}: prompt file is empty")
    return text.strip() + "\n"


def load_prompt(mode: str, prompts_dir: Path | None = None) -> str:
    """The system prompt of ``mode``: ``prompts_dir/<mode>.txt`` if there, else the shipped one."""
    shipped = data_dir("prompts") / f"{mode}.txt"
    if not shipped.is_file():
        raise ConfigError(f"no prompt is shipped for mode {mode!r}")
    if prompts_dir is not None:
        if not prompts_dir.is_dir():
            raise ConfigError(f"{prompts_dir}: prompts folder not found")
        override = prompts_dir / f"{mode}.txt"
        if override.exists():
            return _read(override)
    return _read(shipped)


def task_message(problem: Problem) -> str:
    """The first user message: the problem, and what the answer must define or end with."""
    prompt = problem.prompt.strip()
    if problem.kind == "math":
        return f"{prompt}\n\n{MATH_INSTRUCTION}"
    if problem.entry_point:
        return f"{prompt}\n\nYour final program must define `{problem.entry_point}`."
    return prompt
