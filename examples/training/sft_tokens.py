"""SFT on token ids: ``tracegen convert traces.jsonl --tokenized --only-success
--max-length 4096 --to-hf data/tok`` first."""

from datasets import load_from_disk
from trl import SFTConfig, SFTTrainer

MODEL = "tiny-model"  # your model: the one whose tokenizer made the ids

columns = ["input_ids", "attention_mask", "assistant_masks"]
trainer = SFTTrainer(
    model=MODEL,
    train_dataset=load_from_disk("data/tok").select_columns(columns),
    # On a GPU: drop use_cpu, bf16=False and max_steps.
    args=SFTConfig(max_length=4096, use_cpu=True, bf16=False, max_steps=2, report_to="none"),
)
trainer.train()
