"""Prompts that go on from the ids a model sampled, for the backends that tokenize prompts.

Rendering a conversation again and tokenizing the text does not give back the ids the model
sampled: a model may sample a tokenization of its text other than the one the tokenizer
would choose (``"print"`` as ``"pr"`` + ``"int"``). The next prompt of a multi-turn episode
would then differ from the previous prompt and completion, and the episode could not be
exported as one sequence. `Sequences` remembers each request's whole sequence (prompt and
sampled ids) with its text; when a new prompt's text starts with one of them, the prompt is
those ids followed by the tokens of the rest of the text, provided they decode to the same
text as the tokenizer's own ids for the prompt (`Sequences.going_on`). The backends that
tokenize prompts pass their model's tokenizer (its own ``/tokenize`` and ``/detokenize``).
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from collections.abc import Awaitable, Callable

Tokenize = Callable[[str], Awaitable[list[int]]]
"""Text to the model's ids, special tokens read as such and none added."""
Detokenize = Callable[[list[int]], Awaitable[str]]
"""Ids to the model's text, special tokens written out."""

REMEMBERED = 64
"""Sequences kept per backend, the oldest forgotten first. A sequence that a newer one goes
on from is forgotten when the newer one is remembered, so there is about one per episode in
flight; the bound keeps abandoned ones from piling up."""


class Sequences:
    """The latest requests' sequences (text, ids), newest last. Thread-safe."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._seen: deque[tuple[str, array[int]]] = deque(maxlen=size)
        self._lock = threading.Lock()

    def remember(self, text: str, ids: list[int]) -> None:
        """Remember a request's whole sequence: its prompt ids and every sampled id, and
        what they decode to. The sequences it goes on from are forgotten."""
        if not text:
            return
        with self._lock:
            kept = [(seen, old) for seen, old in self._seen if not text.startswith(seen)]
            self._seen.clear()
            self._seen.extend(kept)
            self._seen.append((text, array("i", ids)))  # 4 bytes an id, not a list's 36

    def join(self, text: str) -> tuple[list[int], str] | None:
        """The ids of the longest remembered sequence whose text ``text`` starts with, and the
        rest of ``text`` to tokenize after them; None if there is none."""
        with self._lock:
            found = [(seen, ids) for seen, ids in reversed(self._seen) if text.startswith(seen)]
        if not found:
            return None
        seen, ids = max(found, key=lambda pair: len(pair[0]))  # the newest of the longest
        return ids.tolist(), text[len(seen) :]

    async def going_on(
        self, ids: list[int], tokenize: Tokenize, detokenize: Detokenize
    ) -> list[int]:
        """``ids`` (a rendered prompt, tokenized), or the ids of the sequence its text goes on
        from (`join`) followed by the tokens of the rest, when they decode to the same text."""
        text = await detokenize(ids)
        found = self.join(text)
        if found is None:
            return ids
        seen, rest = found
        joined = seen + await tokenize(rest) if rest else seen
        return joined if joined == ids or await detokenize(joined) == text else ids


_SHARED: dict[str, Sequences] = {}


def shared(model: str) -> Sequences:
    """The sequences of ``model``'s requests in this process, whichever host served them (an
    episode's requests may go to different hosts of a pool)."""
    return _SHARED.setdefault(model, Sequences())
