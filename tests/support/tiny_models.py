"""A randomly initialised 2-layer causal language model small enough to train on the CPU
in a test, and the one-test problem the training tests give it."""

from __future__ import annotations

from typing import Any

ADD_PROBLEM = {
    "id": "add",
    "prompt": "Write `add(a, b)` that returns a + b.",
    "entry_point": "add",
    "tests": [{"name": "small", "kind": "io", "args": [1, 2], "expected": 3}],
}


def tiny_config(config_class: Any, tokenizer: Any, **overrides: Any) -> Any:
    """``config_class`` (a transformers config, e.g. ``LlamaConfig``) for a model of width
    32 and 2 layers over ``tokenizer``'s vocabulary; ``overrides`` replace any field."""
    fields: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 4096,
        "pad_token_id": tokenizer.pad_token_id,
    }
    return config_class(**(fields | overrides))
