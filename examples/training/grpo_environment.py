"""GRPO with tracegen as the environment: the policy's tool calls run in tracegen's sandbox,
and `tracegen.trl.reward` judges each episode. ``python examples/training/tiny_model.py
tiny-tool-model --tools`` first (a model whose chat template renders tool calls)."""

import functools

from trl import GRPOConfig, GRPOTrainer

from tracegen.config import RunSettings
from tracegen.trl import TracegenEnvironment, TracegenReward, close_sandboxes, problems_dataset

MODEL = "tiny-tool-model"  # your model: one whose chat template TRL reads tool calls of

trainer = GRPOTrainer(
    model=MODEL,
    train_dataset=problems_dataset("builtin", limit=4),
    environment_factory=functools.partial(TracegenEnvironment, RunSettings(max_iterations=3)),
    reward_funcs=TracegenReward(traces_path="trl-traces.jsonl"),  # tracegen stats reads it
    # On a GPU: drop use_cpu, bf16=False and max_steps; give a longer max_completion_length.
    args=GRPOConfig(
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=32,
        max_tool_calling_iterations=3,
        use_cpu=True,
        bf16=False,
        max_steps=2,
        report_to="none",
    ),
)
trainer.train()
close_sandboxes()
