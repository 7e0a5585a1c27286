"""The command line: one thin module per command, each parsing flags and calling one library
function. Heavy modules (httpx, datasets, the runner) are imported inside the commands so
that ``tracegen --help`` stays fast."""

from tracegen.cli import (
    convert,
    decontaminate,
    dedup,
    doctor,
    merge,
    problems,
    report,
    run,
    show,
    stats,
    status,
    verify,
)
from tracegen.cli.app import app

__all__ = [
    "app",
    "convert",
    "decontaminate",
    "dedup",
    "doctor",
    "main",
    "merge",
    "problems",
    "report",
    "run",
    "show",
    "stats",
    "status",
    "verify",
]


def main() -> None:
    """Console entry point."""
    app(prog_name="tracegen")
