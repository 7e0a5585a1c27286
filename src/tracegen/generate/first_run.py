"""A first run: the default embedded model with no problems named takes the starter set and
the settings measured to give it a success within minutes (docs: Getting started)."""

from __future__ import annotations

from typing import Any

from tracegen.config import RunSettings
from tracegen.llm.packaged import DEFAULT_MODEL

STARTER_PROBLEMS = "starter"
"""The problem set of a first run: small functions the default embedded model can write."""

FIRST_RUN: dict[str, Any] = {
    "mode": "tool-feedback",
    "num_samples": 4,
    "max_iterations": 1,
    "max_tokens": 256,
}
"""The settings a first run takes where none was given (flag, environment or config file),
measured on the starter set (docs: Getting started): the default model passes the tests in
tool-feedback with about one program in four, always its first (within 250 tokens), never
a later one after seeing the failures; so four fresh samples of each problem, one program
each, and turns cut at 256 tokens, past which only failing programs ramble on."""


def starts_small(settings: RunSettings) -> bool:
    """Whether this is a first run: the default embedded model, and no problems named."""
    return (
        settings.backend == "local"
        and settings.model == DEFAULT_MODEL
        and "problems" not in settings.model_fields_set
        and not settings.problem_ids
    )


def first_run(settings: RunSettings) -> tuple[RunSettings, str]:
    """``settings`` for a first run: the starter set, and `FIRST_RUN` for each setting not
    given; with the one line that says so."""
    preset = {k: v for k, v in FIRST_RUN.items() if k not in settings.model_fields_set}
    chosen = settings.model_copy(update={"problems": STARTER_PROBLEMS, **preset})
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.items())
    taken = f", with {flags}" if flags else ""
    return chosen, (
        f"no problems named: the {STARTER_PROBLEMS} set, small functions sized for "
        f"{DEFAULT_MODEL}{taken} (--problems builtin, humaneval… for more)"
    )
