"""Load HumanEval, MBPP and GSM8K from the Hugging Face hub with `datasets` (imported lazily)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass

from tracegen.errors import DatasetUnavailable, ProblemFileError
from tracegen.problems.contests import (
    from_code_contests,
    from_codeforces,
    from_deepcoder,
    from_verifiable,
)
from tracegen.problems.formats import Row, RowMapper, from_gsm8k, from_humaneval, from_mbpp
from tracegen.schema import Problem


@dataclass(frozen=True)
class HubDataset:
    path: str
    config: str | None
    split: str
    mapper: RowMapper
    id_prefix: str | None = None
    """How the ids of its problems begin, where that tells them apart (a dataset card counts
    the problems of each source by it)."""


HUB_DATASETS: dict[str, HubDataset] = {
    "humaneval": HubDataset(
        "openai/openai_humaneval", None, "test", from_humaneval, id_prefix="HumanEval/"
    ),
    "mbpp": HubDataset("google-research-datasets/mbpp", "full", "test", from_mbpp, "mbpp/"),
    "gsm8k": HubDataset("openai/gsm8k", "main", "test", from_gsm8k, id_prefix="gsm8k/"),
    "code_contests": HubDataset("deepmind/code_contests", None, "test", from_code_contests),
    "codeforces": HubDataset("open-r1/codeforces", None, "test", from_codeforces),
    "deepcoder": HubDataset(
        "agentica-org/DeepCoder-Preview-Dataset", "lcbv5", "test", from_deepcoder
    ),
    "verifiable-coding-problems": HubDataset(
        "open-r1/verifiable-coding-problems-python", None, "train", from_verifiable
    ),
}
"""Datasets loadable by name. APPS, TACO and LiveCodeBench ship loading scripts, which
`datasets` no longer runs: download their rows and pass the file."""


PROBE_TIMEOUT = 5.0
"""Seconds the reachability check waits for the hub unless `HF_HUB_ETAG_TIMEOUT` says otherwise."""


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
    """Download (or read from the `datasets` cache) one of `HUB_DATASETS` and map it.

    When the hub does not answer, the load runs offline: a cached copy is used and a missing one
    fails at once instead of after the libraries' retries.
    """
    spec = HUB_DATASETS[name]
    import datasets

    no_answer: str | None = None
    try:
        with _quiet_libraries():
            if not datasets.config.HF_HUB_OFFLINE:
                no_answer = _why_hub_silent(spec.path)
            with _offline() if no_answer else nullcontext():
                rows = datasets.load_dataset(spec.path, spec.config, split=spec.split)
    except Exception as e:  # any failure of the download or the cache is reported the same way
        reason = _first_line(e)
        if no_answer:  # offline, `datasets` raises ConnectionError when nothing is cached
            cache = "no copy is cached" if isinstance(e, ConnectionError) else reason
            reason = f"{datasets.config.HF_ENDPOINT} does not answer ({no_answer}); {cache}"
        raise DatasetUnavailable(
            f"cannot download {name} from the Hugging Face hub ({spec.path}): {reason}; "
            "pass a local file"
        ) from None
    return map_rows(rows, spec.mapper, spec.path)


def _why_hub_silent(repo_id: str) -> str | None:
    """Why one request for the dataset card, without retries, got no answer; None if it got one."""
    import datasets
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    timeout = (
        constants.HF_HUB_ETAG_TIMEOUT if "HF_HUB_ETAG_TIMEOUT" in os.environ else PROBE_TIMEOUT
    )
    url = hf_hub_url(
        repo_id,
        datasets.config.REPOCARD_FILENAME,
        repo_type="dataset",
        endpoint=datasets.config.HF_ENDPOINT,
    )
    try:
        get_hf_file_metadata(url, timeout=timeout)
    except HfHubHTTPError:  # an HTTP error status (missing file, gated, rate limit) is an answer
        return None
    except Exception as e:  # DNS, refused or timed-out connection, proxy, TLS
        return _first_line(e)
    return None


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


@contextmanager
def _offline() -> Iterator[None]:
    """Run `datasets` and `huggingface_hub` in their offline mode, as `HF_HUB_OFFLINE=1` does."""
    import datasets
    from huggingface_hub import constants

    saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


@contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Silence the warnings and progress bars of `datasets` and `huggingface_hub`, then restore."""
    import datasets
    import huggingface_hub.utils as hub_utils

    with ExitStack() as stack:
        for log in (datasets.utils.logging, hub_utils.logging):
            stack.callback(log.set_verbosity, log.get_verbosity())
            log.set_verbosity_error()
        if datasets.is_progress_bar_enabled():
            stack.callback(datasets.enable_progress_bars)
        if not hub_utils.are_progress_bars_disabled():
            stack.callback(hub_utils.enable_progress_bars)
        datasets.disable_progress_bars()
        hub_utils.disable_progress_bars()
        yield
