"""HumanEval, MBPP and GSM8K: local files in their real formats, and the hub path."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import orjson
import pytest

from tracegen.errors import DatasetUnavailable, ProblemFileError
from tracegen.problems import load_problems


def test_humaneval_gz_is_detected_and_fully_mapped(humaneval_gz: Path) -> None:
    problems = load_problems(str(humaneval_gz))
    assert len(problems) == 164
    first = problems[0]
    assert first.id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert first.source == "humaneval"
    [test] = first.tests
    assert test.kind == "check" and "def check(candidate)" in (test.code or "")
    assert first.setup == "from typing import List"
    assert first.reference_solution is not None
    assert first.reference_solution.startswith(first.prompt)


def test_humaneval_setup_keeps_helpers_the_solution_may_omit(data_dir: Path) -> None:
    by_id = {p.id: p for p in load_problems(str(data_dir / "humaneval_sample.jsonl"))}
    find_zero = by_id["HumanEval/32"]
    assert "import math" in find_zero.setup and "def poly(" in find_zero.setup
    assert "def find_zero" not in find_zero.setup
    assert by_id["HumanEval/64"].setup.startswith("FIX = ")


def test_mbpp_rows_become_assert_tests_with_entry_point(data_dir: Path) -> None:
    by_id = {p.id: p for p in load_problems(str(data_dir / "mbpp_sample.jsonl"))}
    remove = by_id["mbpp/11"]
    assert remove.entry_point == "remove_Occ"
    assert [t.name for t in remove.tests] == [
        "test_1",
        "test_2",
        "test_3",
        "challenge_1",
        "challenge_2",
    ]
    assert all(t.kind == "assert" for t in remove.tests)
    assert 'assert remove_Occ("hello","l") == "heo"' in remove.prompt
    assert "\r" not in (remove.reference_solution or "")
    sphere = by_id["mbpp/82"]
    assert sphere.entry_point == "volume_sphere"
    assert sphere.setup == "import math"


def test_mbpp_sanitized_rows_are_understood(data_dir: Path) -> None:
    [p] = load_problems(str(data_dir / "mbpp_sanitized_sample.jsonl"))
    assert p.id == "mbpp/2"
    assert p.entry_point == "similar_elements"
    assert p.prompt.startswith("Write a function to find the shared elements")


def test_gsm8k_rows_become_math_problems_with_numeric_answer(data_dir: Path) -> None:
    problems = load_problems(str(data_dir / "gsm8k_sample.jsonl"))
    assert [p.id for p in problems] == ["gsm8k/0", "gsm8k/1", "gsm8k/2"]
    janet = problems[0]
    assert janet.kind == "math" and janet.entry_point is None
    assert janet.prompt.startswith("Janet’s ducks lay 16 eggs")
    [test] = janet.tests
    assert test.kind == "answer" and test.expected == "18"
    assert problems[2].tests[0].expected == "70000"


def test_dataset_row_that_does_not_fit_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gsm.jsonl"
    path.write_bytes(orjson.dumps({"question": "q", "answer": "no final line"}) + b"\n")
    with pytest.raises(ProblemFileError, match=rf"{path}:1: not a valid GSM8K problem: .*####"):
        load_problems(str(path))


@pytest.mark.parametrize(
    ("name", "fixture", "hub_args", "first_id"),
    [
        ("mbpp", "mbpp_sample.jsonl", ("google-research-datasets/mbpp", "full"), "mbpp/11"),
        ("gsm8k", "gsm8k_sample.jsonl", ("openai/gsm8k", "main"), "gsm8k/0"),
        ("humaneval", "humaneval_sample.jsonl", ("openai/openai_humaneval", None), "HumanEval/0"),
    ],
)
def test_hub_names_load_through_datasets_and_map_the_same_rows(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    data_dir: Path,
    name: str,
    fixture: str,
    hub_args: tuple[str, str | None],
    first_id: str,
) -> None:
    calls: list[tuple[Any, ...]] = []
    probed: list[str] = []
    real_load = datasets.load_dataset

    def from_local_file(path: str, config: str | None = None, *, split: str) -> Any:
        calls.append((path, config, split, datasets.config.HF_HUB_OFFLINE))
        local = str(data_dir / fixture)
        return real_load("json", data_files=local, split="train", cache_dir=str(tmp_path))

    monkeypatch.setattr(datasets, "load_dataset", from_local_file)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(
        huggingface_hub, "get_hf_file_metadata", lambda url, **_: probed.append(url)
    )
    problems = load_problems(name, limit=2)
    assert calls == [(*hub_args, "test", False)]
    endpoint = datasets.config.HF_ENDPOINT
    assert probed == [f"{endpoint}/datasets/{hub_args[0]}/resolve/main/README.md"]
    assert problems[0].id == first_id
    assert problems == load_problems(str(data_dir / fixture), limit=2)


@pytest.mark.slow
def test_offline_hub_load_is_a_one_line_error() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tracegen", "problems", "mbpp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == DatasetUnavailable.exit_code
    assert done.stderr.startswith("tracegen: error: cannot download mbpp from the Hugging Face hub")
    assert "pass a local file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_problems(name: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`tracegen problems NAME` with its own Hugging Face caches under ``cache``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    hf = {"HF_HOME": str(cache / "home"), "HF_DATASETS_CACHE": str(cache / "datasets")}
    return subprocess.run(
        [sys.executable, "-m", "tracegen", "problems", name, "--json"],
        env={**clean, **hf, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _cache_gsm8k(cache: Path, rows: Path) -> None:
    """Put ``rows`` in the `datasets` cache where a download of openai/gsm8k would leave them."""
    from datasets.packaged_modules.json.json import Json

    build = cache / "build"
    builder = Json(
        cache_dir=str(build),
        dataset_name="gsm8k",
        config_name="main",
        config_id="main",
        hash="0123abcd",
        data_files={"test": str(rows)},
    )
    builder.download_and_prepare()
    (cache / "datasets").mkdir(parents=True)
    (build / "gsm8k").rename(cache / "datasets" / "openai___gsm8k")


@pytest.mark.slow
@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", ["gsm8k", "mbpp", "humaneval"])
def test_unreachable_hub_fails_at_once_with_one_line(tmp_path: Path, name: str) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    done = _run_problems(name, tmp_path, HF_ENDPOINT=endpoint)
    assert done.returncode == DatasetUnavailable.exit_code
    [line] = done.stderr.splitlines()
    assert line.startswith(f"tracegen: error: cannot download {name} from the Hugging Face hub")
    assert f"{endpoint} does not answer" in line and "; no copy is cached;" in line
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.slow
@pytest.mark.timeout(20)
@pytest.mark.parametrize("offline", ["unreachable", "HF_HUB_OFFLINE"])
def test_cached_hub_dataset_loads_quietly_without_the_hub(
    tmp_path: Path, data_dir: Path, offline: str
) -> None:
    _cache_gsm8k(tmp_path, data_dir / "gsm8k_sample.jsonl")
    if offline == "unreachable":
        env = {"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    else:
        env = {"HF_HUB_OFFLINE": "1"}
    done = _run_problems("gsm8k", tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    ids = [orjson.loads(line)["id"] for line in done.stdout.splitlines()]
    assert ids == ["gsm8k/0", "gsm8k/1", "gsm8k/2"]
