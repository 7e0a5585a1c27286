"""MkDocs hook: the command-line reference, generated from tracegen's Typer app at build time.

A page holding the line ``<!-- cli-reference -->`` gets, in its place, what Typer's own
documentation generator (``typer.cli.get_docs_for_click``) writes for every command: usage,
arguments and options with their help, exactly as ``tracegen COMMAND --help`` has them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"


def cli_reference() -> str:
    """Markdown for every tracegen command, from the app itself."""
    import typer
    import typer.cli

    from tracegen.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="tracegen")
    text = typer.cli.get_docs_for_click(obj=command, ctx=ctx, name="tracegen")
    return "\n".join(_demoted(text.splitlines()))


def _demoted(lines: list[str]) -> Iterator[str]:
    """Every heading one level down, below the page's own title (code blocks untouched)."""
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        yield f"#{line}" if line.startswith("#") and not fenced else line


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
