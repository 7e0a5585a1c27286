"""Two GRPO steps of TRL's ``GRPOTrainer`` (trl 1.16.0) on the CPU with tracegen's
``environment_factory``: a tiny randomly initialised model writes tool calls, tracegen's
sandbox runs them, tracegen's judge scores the final program, the parameters move.

The model is a 2-layer Qwen3 with a byte-level tokenizer holding two whole tool calls as
tokens, one right and one wrong; ``sequence_bias`` (a transformers generation option) makes
its replies ``<tool_call>`` + one of them + ``</tool_call>``, so which program runs is the
model's sampling, and the rewards (from real executions) differ within a group.
"""

from __future__ import annotations

import functools
from pathlib import Path

import orjson
import pytest

from tracegen.config import RunSettings

pytestmark = pytest.mark.slow

GOOD = '\n{"name": "python", "arguments": {"code": "def add(a, b):\\n    return a + b"}}\n'
BAD = '\n{"name": "python", "arguments": {"code": "def add(a, b):\\n    return a - b"}}\n'
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
SPECIAL += ["<tool_response>", "</tool_response>", "<think>", "</think>"]
ADD = {
    "id": "add",
    "prompt": "Write `add(a, b)` that returns a + b.",
    "entry_point": "add",
    "tests": [{"name": "small", "kind": "io", "args": [1, 2], "expected": 3}],
}


def _tokenizer(path: Path) -> Path:
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(["Run Python in a sandbox, print what you want to see."], trainer)
    tok.add_tokens([GOOD, BAD])
    path.mkdir(parents=True)
    tok.save(str(path / "tokenizer.json"))
    # Qwen3's own template, as TRL ships it: TRL knows how to read its tool calls.
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": template,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    (path / "tokenizer_config.json").write_bytes(orjson.dumps(config))
    return path


def test_two_grpo_steps_with_tracegen_environments_move_the_parameters(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    trl = pytest.importorskip("trl")
    from tracegen.trl import TracegenEnvironment, problems_dataset

    problems = tmp_path / "problems.jsonl"
    problems.write_bytes(orjson.dumps(ADD) + b"\n")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(_tokenizer(tmp_path / "tok")))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>")}
    good, bad = (tokenizer.convert_tokens_to_ids(t) for t in (GOOD, BAD))
    end, call, close = tokenizer.eos_token_id, ids["<tool_call>"], ids["</tool_call>"]
    bias = [[[call], 8.0], [[call, good], 16.0], [[call, bad], 16.0]]
    bias += [[[good, close], 24.0], [[bad, close], 24.0], [[close, end], 32.0]]

    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=end,
    )
    model = transformers.Qwen3ForCausalLM(config)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}

    rewards: list[float] = []

    class Recorded(TracegenEnvironment):
        def get_reward(self) -> float:
            reward = super().get_reward()
            rewards.append(reward)
            return reward

    settings = RunSettings(sandbox="rlimit", exec_timeout=10, max_iterations=2)
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
    trainer = trl.GRPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=problems_dataset(str(problems)),
        environment_factory=functools.partial(Recorded, settings),
    )
    trainer.train()

    assert len(rewards) == 8, "one judged episode per rollout"
    assert set(rewards) == {1.0, -0.9}, "the right program passes, the wrong one fails"
    moved = [k for k, v in model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert moved, "GRPO changed no parameter"


def test_offline_grpo_on_recorded_rollouts_moves_the_parameters(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    trl = pytest.importorskip("trl")
    from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback
    from tracegen.export.rl import trl_row
    from tracegen.export.tokens.sequences import token_episode
    from tracegen.trl import RecordedRollouts

    tok_dir = make_tokenizer(tmp_path / "tok")
    chatml = ChatmlModel(tok_dir)
    records = tmp_path / "t.rl-trl.jsonl"
    with records.open("wb") as fh:
        for trace in (tool_feedback(chatml, 0), inline_tools(chatml, 1)):
            episode = token_episode(trace, None, require_exact=True)
            for sequence in episode.sequences:
                row = trl_row(trace, episode, sequence)
                fh.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.LlamaForCausalLM(config)
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
