"""The training examples (docs/training.md) run as written: each
``tracegen convert`` command, then the Python after it, with a 2-layer model that has
SmolLM2-135M-Instruct's chat template in place of SmolLM2 itself, on CPU."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.token_traces import (
    ChatmlModel,
    inline_tools,
    make_tokenizer,
    tiny_llama,
    tool_feedback,
)
from tests.support.traces import write_traces

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""SmolLM2-135M-Instruct's chat template (``tokenizer_config.json`` of
HuggingFaceTB/SmolLM2-135M-Instruct, the one its GGUF carries): no ``{% generation %}``."""
ON_CPU = """
import runpy, sys
import trl

for name in ("SFTConfig", "GRPOConfig"):
    base = getattr(trl, name)

    def __init__(self, *args, __base=base, **kwargs):
        kwargs.update(use_cpu=True, bf16=False, max_steps=2, report_to=[], save_strategy="no")
        __base.__init__(self, *args, **kwargs)

    setattr(trl, name, type(name, (base,), {"__init__": __init__}))
runpy.run_path(sys.argv[1], run_name="__main__")
"""
"""Runs an example with its trainer's config made CPU-sized: the page's own arguments are
kept, and these added (``use_cpu``, two steps, nothing reported or saved)."""


def examples() -> list[tuple[str, str, str]]:
    """(name, shell command, Python) of each example: a ``tracegen convert`` block followed
    by a Python block, on the site's training page."""
    section = (ROOT / "docs" / "training.md").read_text()
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    found = []
    for (lang, command), (next_lang, code) in itertools.pairwise(blocks):
        if lang == "" and command.startswith("tracegen convert") and next_lang == "python":
            name = command.split()[3]
            found.append((name, command.strip(), code))
    return found


EXAMPLES = examples()


def test_the_training_page_has_the_three_training_examples() -> None:
    assert [name for name, _, _ in EXAMPLES] == ["--chat-format", "--tokenized", "--rl"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``traces.jsonl`` (two problems of four episodes each, successes and not) and a tiny
    model with SmolLM2's chat template, saved where the examples name SmolLM2."""
    from transformers import AutoTokenizer

    work = tmp_path_factory.mktemp("train")
    model_dir = make_tokenizer(work / MODEL, SMOLLM2_TEMPLATE)
    model = ChatmlModel(make_tokenizer(work / "chatml"))
    traces = []
    for k, problem in enumerate(["add", "sum"]):
        traces.append(tool_feedback(model, 4 * k, problem_id=problem))
        traces += [inline_tools(model, 4 * k + j, problem_id=problem) for j in (1, 2, 3)]
    write_traces(work / "traces.jsonl", traces)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    tiny_llama(tokenizer, positions=4096, eos_token_id=end).save_pretrained(str(model_dir))
    (work / "on_cpu.py").write_text(ON_CPU)
    return work


@pytest.mark.parametrize(("name", "command", "code"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_each_training_example_runs_as_written(
    name: str, command: str, code: str, workdir: Path
) -> None:
    converted = subprocess.run(
        [sys.executable, "-m", "tracegen", *command.split()[1:]],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert converted.returncode == 0, converted.stderr
    script = workdir / f"example{name.replace('-', '_')}.py"
    script.write_text(code)
    trained = subprocess.run(
        [sys.executable, "on_cpu.py", script.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "'train_loss'" in trained.stdout + trained.stderr


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
            model=str(workdir / MODEL),
            train_dataset=load_from_disk(str(data)),
            args=args,
        )
