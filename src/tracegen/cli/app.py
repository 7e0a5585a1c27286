"""The Typer application every command registers on, and the one-line error edge."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from tracegen.errors import TracegenError


class _Group(TyperGroup):
    """Turns every `TracegenError` into one line on stderr and its exit status."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TracegenError as e:
            typer.echo(f"tracegen: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


app = typer.Typer(
    cls=_Group,
    help="Generate executed reasoning traces for training code-writing models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
