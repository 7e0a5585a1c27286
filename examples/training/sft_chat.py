"""SFT on chat messages: ``tracegen convert traces.jsonl --chat-format --only-success
--to-hf data/sft`` first."""

from datasets import load_from_disk
from trl import SFTConfig, SFTTrainer

MODEL = "tiny-model"  # your model: a local directory or a hub name

trainer = SFTTrainer(
    model=MODEL,
    train_dataset=load_from_disk("data/sft"),
    # On a GPU: drop use_cpu, bf16=False and max_steps.
    args=SFTConfig(max_length=None, use_cpu=True, bf16=False, max_steps=2, report_to="none"),
)
trainer.train()
