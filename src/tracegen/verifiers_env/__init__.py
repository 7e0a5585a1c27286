"""tracegen as a verifiers environment (``pip install 'tracegen[verifiers]'``; docs/rl.md).

Its id is ``tracegen-verifiers`` (the top-level module ``tracegen_verifiers`` re-exports
what is here): ``vf-eval tracegen-verifiers --env.taskset.tracegen '{…}' …``.
"""

from tracegen.verifiers_env.environment import (
    TracegenEnv,
    TracegenEnvConfig,
    TracegenTaskset,
    TracegenTasksetConfig,
)

__all__ = ["TracegenEnv", "TracegenEnvConfig", "TracegenTaskset", "TracegenTasksetConfig"]
