"""Traces as token ids for training: sequences and loss masks (`sequences`), the tokenizer
behind ``--tokenizer`` (`tokenizer`), raw logprobs tempered (`tempering`), tokenized SFT
records (`sft`), and the token formats of `tracegen convert` (`formats`).

Imports nothing itself, so a text format never loads numpy."""
