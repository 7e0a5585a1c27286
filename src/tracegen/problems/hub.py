"""Load HumanEval, MBPP and GSM8K from the Hugging Face hub with `datasets` (imported lazily)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracegen.errors import DatasetUnavailable, ProblemFileError
from tracegen.problems.formats import Row, RowMapper, from_gsm8k, from_humaneval, from_mbpp
from tracegen.schema import Problem


@dataclass(frozen=True)
class HubDataset:
    path: str
    config: str | None
    split: str
    mapper: RowMapper


HUB_DATASETS: dict[str, HubDataset] = {
    "humaneval": HubDataset("openai/openai_humaneval", None, "test", from_humaneval),
    "mbpp": HubDataset("google-research-datasets/mbpp", "full", "test", from_mbpp),
    "gsm8k": HubDataset("openai/gsm8k", "main", "test", from_gsm8k),
}


def map_rows(rows: Iterable[Row], mapper: RowMapper, label: str) -> list[Problem]:
    """Map dataset rows to problems; a row that does not fit names ``label`` and its index."""
    problems = []
    for index, row in enumerate(rows):
        try:
            problems.append(mapper(row, index))
        except (ValueError, KeyError, TypeError) as e:
            raise ProblemFileError(f"{label} row {index}: cannot use it: {e}") from None
    return problems


def load_hub(name: str) -> list[Problem]:
    """Download (or read from the `datasets` cache) one of `HUB_DATASETS` and map it."""
    spec = HUB_DATASETS[name]
    import datasets

    try:
        rows = datasets.load_dataset(spec.path, spec.config, split=spec.split)
    except Exception as e:  # any failure of the download or the cache is reported the same way
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DatasetUnavailable(
            f"cannot download {name} from the Hugging Face hub ({spec.path}): {reason}; "
            "pass a local file"
        ) from None
    return map_rows(rows, spec.mapper, spec.path)
