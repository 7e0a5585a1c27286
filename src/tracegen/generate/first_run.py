"""A first run: the default embedded model with no problems named takes the starter set and,
when no generation setting was given, the settings measured to give it a success within
minutes (docs: Getting started)."""

from __future__ import annotations

from typing import Any

from tracegen.config import GenerationSettings, RunSettings
from tracegen.llm.factory import BackendChoice, runs_in_process
from tracegen.llm.packaged import DEFAULT_MODEL

STARTER_PROBLEMS = "starter"
"""The problem set of a first run: small functions the default embedded model can write."""

FIRST_RUN: dict[str, Any] = {
    "mode": "tool-feedback",
    "num_samples": 4,
    "max_iterations": 1,
    "max_tokens": 256,
}
"""The settings a first run takes when no generation setting was given (flag, environment or
config file), measured on the starter set (docs: Getting started): the default model passes
the tests in tool-feedback with about one program in four, always its first (within 250
tokens), never a later one after seeing the failures; so four fresh samples of each problem,
one program each, and turns cut at 256 tokens, past which only failing programs ramble on."""

GENERATION = (set(GenerationSettings.model_fields) | {"num_samples"}) - {"model", "chat_template"}
"""The settings that shape the episodes: giving any of them keeps the preset away."""


def starts_small(settings: RunSettings, chosen: BackendChoice) -> bool:
    """Whether this is a first run: the default embedded model (as ``--backend`` and
    ``--model`` came to, `chosen`), and no problems named."""
    return (
        runs_in_process(chosen.backend)
        and chosen.model == DEFAULT_MODEL
        and "problems" not in settings.model_fields_set
        and not settings.problem_ids
    )


def first_run(settings: RunSettings) -> tuple[dict[str, Any], str]:
    """What a first run takes instead of ``settings``' defaults: the starter set, and
    `FIRST_RUN` when no generation setting was given; with the one line that says so. The
    run's setup records them (`tracegen.generate.setup.RunSetup`); the settings are left as
    given."""
    given = sorted(GENERATION & settings.model_fields_set)
    preset = {} if given else FIRST_RUN
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.items())
    if preset:
        taken = f", with {flags}"
    else:
        shown = " ".join(f"--{k.replace('_', '-')}" for k in given)
        taken = f", with the settings given ({shown}: no first-run preset)"
    return {"problems": STARTER_PROBLEMS, **preset}, (
        f"no problems named: the {STARTER_PROBLEMS} set, small functions sized for "
        f"{DEFAULT_MODEL}{taken} (--problems builtin, humaneval… for more)"
    )
