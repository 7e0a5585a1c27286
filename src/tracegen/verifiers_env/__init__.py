"""tracegen as a verifiers environment (``pip install 'tracegen[verifiers]'``; docs/rl.md).

Its id is ``tracegen-verifiers`` (the top-level module ``tracegen_verifiers`` re-exports
what is here): ``env eval tracegen-verifiers --env.taskset.tracegen '{…}' …`` (verifiers'
v1 eval command), or in Python
``load_environment(problems=…, mode=…)``.
"""

from tracegen.verifiers_env.environment import (
    TracegenEnv,
    TracegenEnvConfig,
    TracegenTaskset,
    TracegenTasksetConfig,
    load_environment,
)

__all__ = [
    "TracegenEnv",
    "TracegenEnvConfig",
    "TracegenTaskset",
    "TracegenTasksetConfig",
    "load_environment",
]
