"""The verifiers environment id ``tracegen-verifiers`` (verifiers imports a top-level module
named by the id): tracegen's taskset and env, from `tracegen.verifiers_env`."""

from tracegen.verifiers_env import TracegenEnv, TracegenTaskset, load_environment

__all__ = ["TracegenEnv", "TracegenTaskset", "load_environment"]
