"""Any tracegen problem set as the dataset ``GRPOTrainer`` takes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracegen.data.prompts import load_prompt, task_message
from tracegen.problems import load_problems

if TYPE_CHECKING:
    from datasets import Dataset

PROBLEM_COLUMN = "problem"
"""The column holding each problem as tracegen's JSON record (what ``reset`` reads)."""


def problems_dataset(
    source: str = "builtin",
    *,
    mode: str = "native-tools",
    limit: int | None = None,
    problem_ids: list[str] | None = None,
    prompts_dir: Path | None = None,
) -> Dataset:
    """One row per problem of ``source`` (a shipped set, ``humaneval``, a file…, as
    ``tracegen run --problems`` takes): ``prompt`` (the system prompt of ``mode`` and the task,
    as the episode engine writes them), ``problem_id``, and ``problem`` (the problem as JSON,
    for `tracegen.trl.TracegenEnvironment.reset`)."""
    from datasets import Dataset

    system = load_prompt(mode, prompts_dir)
    problems = load_problems(source, limit=limit, problem_ids=problem_ids)
    return Dataset.from_dict(
        {
            "prompt": [
                [
                    {"role": "system", "content": system},
                    {"role": "user", "content": task_message(p)},
                ]
                for p in problems
            ],
            "problem_id": [p.id for p in problems],
            PROBLEM_COLUMN: [p.model_dump_json(by_alias=True) for p in problems],
        }
    )
