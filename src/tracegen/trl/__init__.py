"""tracegen for TRL's ``GRPOTrainer`` (trl ≥ 1.16, ``pip install 'tracegen[train]'``).

- `TracegenEnvironment`, for ``environment_factory``: its ``python`` tool runs a script in
  tracegen's sandbox (the native-tools mode's tool), ``reset(**row)`` sets the problem and
  ``get_reward()`` is tracegen's judge on the final program, run in the sandbox too;
- `problems_dataset`: any tracegen problem set as the ``datasets.Dataset`` the trainer takes;
- `RecordedRollouts`: a ``rollout_func`` (and its dataset and reward) serving the records
  ``tracegen convert --rl trl`` wrote, for GRPO on episodes generated beforehand;
- `close_sandboxes`: end the sandboxes the environments share before the process exits.
"""

from tracegen.trl.dataset import problems_dataset
from tracegen.trl.environment import TracegenEnvironment, close_sandboxes
from tracegen.trl.recorded import RecordedRollouts

__all__ = ["RecordedRollouts", "TracegenEnvironment", "close_sandboxes", "problems_dataset"]
