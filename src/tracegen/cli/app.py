"""The Typer application every command registers on, and the one-line error edge.

Help is plain text: Typer's rich help pulls in Markdown, syntax highlighting and traceback
rendering (about 0.1 s before a command can start), which `tracegen --help` does not need.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from tracegen.errors import TracegenError

_UsageError: type[Exception] = typer.BadParameter.__bases__[0]
"""click's ``UsageError`` as Typer raises it (Typer may read flags with its own copy of click)."""


class _Group(TyperGroup):
    """Turns every `TracegenError`, and a flag click cannot read, into one line on stderr
    and its exit status (2 for a flag)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TracegenError as e:
            typer.echo(f"tracegen: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except _UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                raise
            context = getattr(e, "ctx", None)
            where = context.command_path if context is not None else "tracegen"
            message = " ".join(e.format_message().split())  # type: ignore[attr-defined]
            typer.echo(f"tracegen: error: {message} (see {where} --help)", err=True)
            raise typer.Exit(2) from None

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


app = typer.Typer(
    cls=_Group,
    help="Generate executed reasoning traces for training code-writing models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
