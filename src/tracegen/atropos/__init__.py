"""tracegen as a live Atropos environment (``pip install 'tracegen[atropos]'``).

`tracegen.atropos.env.TracegenEnv` is the ``BaseEnv`` subclass; ``python -m tracegen.atropos``
runs its ``serve``, ``process`` and ``evaluate`` commands. The settings (`settings`) and the
shaping of groups, metrics and pass@k (`groups`) import no atroposlib.
"""

from __future__ import annotations

from tracegen.errors import MissingExtraError, TracegenError


def main() -> None:
    """The command line: Atropos's three commands for `TracegenEnv`."""
    import sys

    try:
        from tracegen.atropos.env import TracegenEnv
    except ModuleNotFoundError as e:
        if e.name is None or not e.name.startswith(("atroposlib", "wandb", "pydantic_cli")):
            raise
        error: TracegenError = MissingExtraError(
            f"the Atropos environment needs {e.name}: pip install 'tracegen[atropos]'"
        )
        print(f"tracegen: error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    TracegenEnv.cli()
