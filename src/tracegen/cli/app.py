"""The Typer application every command registers on, and the one-line error edge.

Help is plain text: Typer's rich help pulls in Markdown, syntax highlighting and traceback
rendering (about 0.1 s before a command can start), which `tracegen --help` does not need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer
from typer._click.utils import make_default_short_help
from typer.core import TyperCommand, TyperGroup

from tracegen.errors import TracegenError
from tracegen.terminal import one_line

_UsageError: type[Exception] = typer.BadParameter.__bases__[0]
"""click's ``UsageError`` as Typer raises it (Typer may read flags with its own copy of click)."""


class _Group(TyperGroup):
    """Turns every `TracegenError`, and a flag click cannot read, into one line on stderr
    and its exit status (2 for a flag)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except TracegenError as e:
            from tracegen.config import redact_url

            typer.echo(f"tracegen: error: {one_line(redact_url(str(e)), 2000)}", err=True)
            raise typer.Exit(e.exit_code) from None
        except OSError as e:
            if e.filename is None:
                raise
            from tracegen.config import redact_url

            where = one_line(redact_url(str(e.filename)), 200)
            typer.echo(f"tracegen: error: {where}: {e.strerror or e}", err=True)
            raise typer.Exit(2) from None
        except _UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                raise
            context = getattr(e, "ctx", None)
            where = context.command_path if context is not None else "tracegen"
            message = " ".join(e.format_message().split())  # type: ignore[attr-defined]
            typer.echo(f"tracegen: error: {one_line(message, 2000)} (see {where} --help)", err=True)
            raise typer.Exit(2) from None

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted([*LAZY, *self.commands])

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in LAZY:
            return LAZY[cmd_name].command()
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The list of commands, without building the ones made from settings."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            if name in LAZY:
                rows.append((name, make_default_short_help(LAZY[name].summary, limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class PanelCommand(TyperCommand):
    """A command whose plain help shows its options under the panels they declare
    (``rich_help_panel``), after the ones that declare none, as rich help would."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {"Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panel = getattr(param, "rich_help_panel", None) or "Options"
                panels.setdefault(panel, []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for panel, records in panels.items():
            if records:
                with formatter.section(panel):
                    formatter.write_dl(records)


@dataclass
class LazyCommand:
    """A command whose options are made from a settings model (`settings_options`): built
    the first time it is run or its help is shown, so that ``tracegen --help`` imports no
    settings model."""

    name: str
    build: Callable[[], Callable[..., Any]]
    summary: str
    _command: Any = field(default=None, repr=False)

    def command(self) -> Any:
        if self._command is None:
            one = typer.Typer(add_completion=False, rich_markup_mode="rich")
            one.command(self.name)(self.build())
            self._command = typer.main.get_command(one)
            self._command.name = self.name
        return self._command


LAZY: dict[str, LazyCommand] = {}


def settings_command(name: str, summary: str) -> Callable[[Callable[[], Callable[..., Any]]], None]:
    """Register the command ``name``, made by the decorated function when first needed;
    ``summary`` is its line in ``tracegen --help``."""

    def register(build: Callable[[], Callable[..., Any]]) -> None:
        LAZY[name] = LazyCommand(name, build, summary)

    return register


app = typer.Typer(
    cls=_Group,
    help="Generate executed reasoning traces for training code-writing models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
