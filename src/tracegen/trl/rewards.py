"""tracegen's judgement as a TRL reward function: ``reward_funcs=tracegen.trl.reward``.

TRL (``GRPOTrainer._calculate_rewards``, trl 1.16.0) calls each reward function with
``prompts``, ``completions``, ``completion_ids``, the dataset's columns and, with an
``environment_factory``, ``environments`` (the instance each rollout used), and reads one
float per completion. Each episode is judged by `tracegen.trl.environment.episode_trace`
(the final fenced program or answer of the completion if there is one, else the last program
run) and rewarded with tracegen's formula (`tracegen.grading.reward`, docs/modes.md)::

    reward = clamp(2·score − 1 + 0.1·[a script was run], −1, 1)

where ``score`` is the share of the problem's tests the final program passes (a math
problem: 1 or 0); an episode whose sandbox did not answer gets −1. `binary_reward` is 1.0
for an episode whose final program passes every test, else 0.0. Give ``weights`` to reshape
the formula, ``traces_path`` to append each judged episode to a trace file that ``tracegen
stats`` and ``tracegen report`` read.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracegen.grading.reward import DEFAULT_WEIGHTS, RewardWeights
from tracegen.jsonl import JsonlWriter
from tracegen.schema import Trace
from tracegen.trl.environment import TracegenEnvironment, episode_trace
from tracegen.trl.messages import Completion, chat_messages


class TracegenReward:
    """A reward function for ``GRPOTrainer`` judging each rollout's `TracegenEnvironment`
    (module docstring); its ``__name__`` is what TRL logs the reward under."""

    def __init__(
        self,
        *,
        binary: bool = False,
        weights: RewardWeights = DEFAULT_WEIGHTS,
        traces_path: str | Path | None = None,
        name: str | None = None,
    ) -> None:
        self.binary = binary
        self.weights = weights
        self.traces_path = Path(traces_path) if traces_path is not None else None
        self.__name__ = name or ("binary_reward" if binary else "reward")
        self._samples: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._writer: JsonlWriter | None = None

    def __call__(
        self,
        completions: Sequence[Completion],
        environments: Sequence[Any] | None = None,
        prompts: Sequence[Completion] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if environments is None:
            raise ValueError(
                "tracegen.trl.reward judges the episodes of TracegenEnvironment: give "
                "GRPOTrainer environment_factory=TracegenEnvironment"
            )
        rewards = []
        for i, (completion, env) in enumerate(zip(completions, environments, strict=True)):
            if not isinstance(env, TracegenEnvironment):
                raise TypeError(
                    f"tracegen.trl.reward judges TracegenEnvironment episodes, not "
                    f"{type(env).__name__}"
                )
            trace = episode_trace(env, completion, self.weights)
            if self.traces_path is not None:
                prompt = prompts[i] if prompts is not None else None
                self._write(trace, prompt, completion, kwargs.get("trainer_state"))
            rewards.append(float(trace.success) if self.binary else trace.reward)
        return rewards

    def _write(
        self, trace: Trace, prompt: Completion | None, completion: Completion, state: Any
    ) -> None:
        step = getattr(state, "global_step", None)
        with self._lock:
            sample = self._samples[trace.problem_id]
            self._samples[trace.problem_id] += 1
            if self._writer is None:
                assert self.traces_path is not None
                self._writer = JsonlWriter(self.traces_path)
            trace.sample = sample
            trace.id = f"trl-{trace.problem_id}-{sample}"
            trace.messages = chat_messages(prompt) + chat_messages(completion)
            if step is not None:
                trace.hosts = [f"trl step {step}"]
            self._writer.write(trace.to_row())


reward = TracegenReward()
"""tracegen's reward (module docstring)."""
binary_reward = TracegenReward(binary=True)
"""1.0 when the final program passes every test, else 0.0."""
