"""Two GRPO steps of TRL's ``GRPOTrainer`` (trl 1.16.0) on the CPU with tracegen's
``environment_factory``: a tiny randomly initialised model writes tool calls, tracegen's
sandbox runs them, `tracegen.trl.reward` scores the final program, the parameters move.

The model is a 2-layer Qwen3 with a byte-level tokenizer holding three whole tool calls as
tokens, one right, one wrong and one whose ``code`` is null; ``sequence_bias`` (a
transformers generation option) makes its replies ``<tool_call>`` + one of them +
``</tool_call>``, so which program runs is the model's sampling, and the rewards (from real
executions) differ within a group.
"""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
import pytest

from tests.support.tiny_models import ADD_PROBLEM, tiny_config
from tests.support.token_traces import make_tokenizer
from tracegen.config import RunSettings

pytestmark = pytest.mark.slow

GOOD = '\n{"name": "python", "arguments": {"code": "def add(a, b):\\n    return a + b"}}\n'
BAD = '\n{"name": "python", "arguments": {"code": "def add(a, b):\\n    return a - b"}}\n'
NULL = '\n{"name": "python", "arguments": {"code": null}}\n'
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TOOL_TOKENS += ["<think>", "</think>"]


def _tokenizer(path: Path) -> Path:
    """Qwen3's own template, as TRL ships it (TRL knows how to read its tool calls), and the
    two tool calls as whole tokens."""
    import trl

    template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return make_tokenizer(path, template, special=TOOL_TOKENS, added=[GOOD, BAD, NULL])


def _trainer(tmp_path: Path, dataset, settings: RunSettings, reward):  # type: ignore[no-untyped-def]
    """TRL's ``GRPOTrainer`` on the tiny model (module docstring), groups of 4, 2 steps."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    trl = pytest.importorskip("trl")
    from tracegen.trl import TracegenEnvironment

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(_tokenizer(tmp_path / "tok")))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>")}
    good, bad, null = (tokenizer.convert_tokens_to_ids(t) for t in (GOOD, BAD, NULL))
    end, call, close = tokenizer.eos_token_id, ids["<tool_call>"], ids["</tool_call>"]
    bias = [[[call], 8.0], [[close, end], 32.0]]
    bias += [[[call, t], 16.0] for t in (good, bad, null)]
    bias += [[[t, close], 24.0] for t in (good, bad, null)]

    torch.manual_seed(0)
    config = tiny_config(
        transformers.Qwen3Config,
        tokenizer,
        head_dim=16,
        max_position_embeddings=8192,
        eos_token_id=end,
    )
    model = transformers.Qwen3ForCausalLM(config)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_completion_length=16,
        max_tool_calling_iterations=1,
        learning_rate=1e-2,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        generation_kwargs={"sequence_bias": bias},
    )
    return trl.GRPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        reward_funcs=reward,
        train_dataset=dataset,
        environment_factory=functools.partial(TracegenEnvironment, settings),
    )


def test_grpo_with_tracegen_environments_moves_the_parameters_and_survives_bad_calls(
    tmp_path: Path,
) -> None:
    """Two steps, the sandboxes closed, two steps more with the same (pooled) instances; a
    null ``code`` is a tool error, never a crash."""
    torch = pytest.importorskip("torch")
    from tracegen.trl import TracegenReward, close_sandboxes, problems_dataset

    problems = tmp_path / "problems.jsonl"
    problems.write_bytes(orjson.dumps(ADD_PROBLEM) + b"\n")
    rewards: list[float] = []
    judge = TracegenReward(traces_path=tmp_path / "trl-traces.jsonl")

    def reward(completions, **kwargs):  # type: ignore[no-untyped-def]
        given = judge(completions, **kwargs)
        rewards.extend(given)
        return given

    settings = RunSettings(sandbox="rlimit", exec_timeout=10, max_iterations=2)
    trainer = _trainer(tmp_path, problems_dataset(str(problems)), settings, reward)
    model = trainer.model
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer.train()
    close_sandboxes()
    trainer.train()

    assert len(rewards) == 16, "one judged episode per rollout"
    assert set(rewards) == {1.0, -0.9, -1.0}, "right, wrong, and null code (never run)"
    assert len((tmp_path / "trl-traces.jsonl").read_bytes().splitlines()) == 16
    moved = [k for k, v in model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert moved, "GRPO changed no parameter"


def test_grpo_on_a_dataset_a_user_builds_with_a_problem_id_column(tmp_path: Path) -> None:
    """A dataset of TRL's own shape (a ``prompt`` column) and a ``problem_id`` of the
    environment's problem set: TRL passes the whole row to ``reset``."""
    from datasets import Dataset

    from tracegen.trl import reward

    problems = tmp_path / "problems.jsonl"
    problems.write_bytes(orjson.dumps(ADD_PROBLEM) + b"\n")
    rewards: list[float] = []

    def scored(completions, **kwargs):  # type: ignore[no-untyped-def]
        given = reward(completions, **kwargs)
        rewards.extend(given)
        return given

    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "Write add(a, b)."}]], "problem_id": ["add"]}
    )
    settings = RunSettings(sandbox="rlimit", exec_timeout=10, problems=str(problems))
    _trainer(tmp_path, dataset, settings, scored).train()
    assert len(rewards) == 8 and set(rewards) <= {1.0, -0.9, -1.0} and 1.0 in rewards


def test_offline_grpo_on_recorded_rollouts_moves_the_parameters(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    trl = pytest.importorskip("trl")
    from tests.support.token_traces import (
        ChatmlModel,
        inline_tools,
        tool_feedback,
        write_trl_records,
    )
    from tracegen.trl import RecordedRollouts

    tok_dir = make_tokenizer(tmp_path / "tok")
    chatml = ChatmlModel(tok_dir)
    traces = [tool_feedback(chatml, 0), inline_tools(chatml, 1)]
    records = write_trl_records(tmp_path / "t.rl-trl.jsonl", traces)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(tiny_config(transformers.LlamaConfig, tokenizer))
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    rollouts = RecordedRollouts(records)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.0,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        reward_funcs=rollouts.reward,
        train_dataset=rollouts.dataset(),
        rollout_func=rollouts,
    )
    trainer.train()
    moved = [k for k, v in model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert moved, "GRPO changed no parameter"
