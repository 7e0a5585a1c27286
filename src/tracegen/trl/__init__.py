"""tracegen for TRL's ``GRPOTrainer`` (trl ≥ 1.16, ``pip install 'tracegen[train]'``).

- `TracegenEnvironment`, for ``environment_factory``: its ``python`` tool runs a script in
  tracegen's sandbox (the native-tools mode's tool) and ``reset(**row)`` sets the problem;
- `reward` (and `binary_reward`, `TracegenReward` to configure one), for ``reward_funcs``:
  tracegen's judge on each episode's final program or answer, run in the sandbox too;
- `problems_dataset`: any tracegen problem set as the ``datasets.Dataset`` the trainer takes;
- `RecordedRollouts`: a ``rollout_func`` (and its dataset and reward) serving the records
  ``tracegen convert --rl trl`` wrote, for GRPO on episodes generated beforehand;
- `close_sandboxes`: end the sandboxes the environments share (the next call starts new ones).
"""

from tracegen.trl.dataset import problems_dataset
from tracegen.trl.environment import TracegenEnvironment, close_sandboxes
from tracegen.trl.recorded import RecordedRollouts
from tracegen.trl.rewards import TracegenReward, binary_reward, reward

__all__ = [
    "RecordedRollouts",
    "TracegenEnvironment",
    "TracegenReward",
    "binary_reward",
    "close_sandboxes",
    "problems_dataset",
    "reward",
]
