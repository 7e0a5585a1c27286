"""tracegen as an OpenEnv environment (``pip install 'tracegen[openenv]'``; docs/rl.md).

`TracegenOpenEnv` is the environment, `make_app` OpenEnv's server for it,
``python -m tracegen.openenv`` serves it.
"""

from tracegen.openenv.environment import TracegenOpenEnv
from tracegen.openenv.models import TracegenAction, TracegenObservation, TracegenState
from tracegen.openenv.server import make_app

__all__ = [
    "TracegenAction",
    "TracegenObservation",
    "TracegenOpenEnv",
    "TracegenState",
    "make_app",
]
