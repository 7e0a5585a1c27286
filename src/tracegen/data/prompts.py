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


MAX_EXAMPLES = 3
MAX_EXAMPLE_CHARS = 2000
_LANGUAGE_NAMES = {"python": "Python", "cpp": "C++17", "java": "Java"}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_EXAMPLE_CHARS else text[:MAX_EXAMPLE_CHARS] + "…"


def _program_message(problem: Problem, prompt: str) -> str:
    """A program problem: the statement, its public tests (never a private one) and what
    the program must be."""
    parts = [prompt]
    examples = problem.public_tests[:MAX_EXAMPLES]
    for i, test in enumerate(examples, 1):
        if test.kind == "stdio":
            parts.append(
                f"Example {i}:\nInput:\n```\n{_clip(test.input or '')}\n```\n"
                f"Expected output:\n```\n{_clip(str(test.expected))}\n```"
            )
        else:
            args = ", ".join(repr(a) for a in test.args)
            parts.append(f"Example {i}: {problem.entry_point}({_clip(args)}) == {test.expected!r}")
    language = _LANGUAGE_NAMES.get(problem.language or "", "Python or C++17")
    if problem.entry_point:
        parts.append(
            f"Write it in {language}; your final program must define `{problem.entry_point}`."
        )
    else:
        source = f"the file `{problem.input_file}`" if problem.input_file else "standard input"
        sink = f"the file `{problem.output_file}`" if problem.output_file else "standard output"
        parts.append(f"Write a complete {language} program that reads {source} and writes {sink}.")
    return "\n\n".join(parts)


def task_message(problem: Problem) -> str:
    """The first user message: the problem, and what the answer must define or end with."""
    prompt = problem.prompt.strip()
    if problem.kind == "math":
        return f"{prompt}\n\n{MATH_INSTRUCTION}"
    if problem.is_program:
        return _program_message(problem, prompt)
    if problem.entry_point:
        return f"{prompt}\n\nYour final program must define `{problem.entry_point}`."
    return prompt
