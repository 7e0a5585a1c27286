"""GRPO on recorded episodes: ``tracegen run --num-samples 4`` then ``tracegen convert
traces.jsonl --rl trl`` first. Each group is four different recorded episodes of one problem;
a problem with fewer is left out, and said so."""

from trl import GRPOConfig, GRPOTrainer

from tracegen.trl import RecordedRollouts

MODEL = "tiny-model"  # your model: the one whose tokenizer made the ids
GROUP = 4  # tracegen run --num-samples 4

rollouts = RecordedRollouts("traces.rl-trl.jsonl", group_size=GROUP)
print(rollouts.describe())
trainer = GRPOTrainer(
    model=MODEL,
    reward_funcs=rollouts.reward,
    train_dataset=rollouts.dataset(),
    rollout_func=rollouts,
    # On a GPU: drop use_cpu, bf16=False and max_steps.
    args=GRPOConfig(
        num_generations=GROUP,
        per_device_train_batch_size=GROUP,
        use_cpu=True,
        bf16=False,
        max_steps=2,
        report_to="none",
    ),
)
trainer.train()
