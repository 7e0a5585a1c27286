"""MkDocs hook: the settings and the trace record as tables, generated at build time from
their declarations (`tracegen.config`, `tracegen.schema.Trace`), as the command-line
reference is.

``<!-- settings-reference -->`` becomes one table per settings panel: flag, environment
variables, default, bounds and what the setting does, read from `RunSettings`' fields.
``<!-- trace-record-reference -->`` becomes the trace record's fields: name, type and
meaning, the meaning being each field's docstring in ``src/tracegen/schema.py``.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import typing
from typing import Any

SETTINGS = "<!-- settings-reference -->"
TRACE = "<!-- trace-record-reference -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _bounds(field: Any) -> str:
    shown = []
    for item in field.metadata:
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                shown.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        for name, word in (("min_length", "at least"), ("max_length", "at most")):
            value = getattr(item, name, None)
            if value is not None:
                shown.append(f"{word} {value}")
    return ", ".join(shown)


def _choices(names: list[str] | None) -> str:
    """The names a setting takes, read from its registry (`presentation`)."""
    return f" One of: {_cell(', '.join(f'`{n}`' for n in names))}." if names else ""


def settings_reference() -> str:
    """Every setting of `tracegen run`, by panel, from its declaration."""
    from tracegen.cli.settings_options import presentation
    from tracegen.config import RunSettings

    panels: dict[str, list[str]] = {}
    for name, field in RunSettings.model_fields.items():
        shown = presentation(name, field)
        flags = ", ".join(f"`{f}`" for f in shown["flags"]) if shown["option"] else "—"
        default = f"`{shown['default']}`" if shown["default"] is not None else ""
        env = ", ".join(f"`{v}`" for v in shown["env"])
        row = (
            f"| `{name}` | {flags} | {env} | {default} | {_bounds(field)} | "
            f"{_cell(field.description or '')}{_choices(shown['choices'])} |"
        )
        panel = shown["panel"] if shown["option"] else "Environment and config file only"
        panels.setdefault(panel, []).append(row)
    out = []
    for panel, rows in panels.items():
        out += [f"### {panel}", ""]
        out += ["| setting | flag | environment | default | bounds | what it does |"]
        out += ["|---|---|---|---|---|---|", *rows, ""]
    return "\n".join(out)


def _docstrings(cls: type) -> dict[str, str]:
    """Each field's docstring (the string right after its annotation) in ``cls``' source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[node.target.id] = after.value.value
    return found


def _type(annotation: Any) -> str:
    text = typing._type_repr(annotation)  # type: ignore[attr-defined]
    text = re.sub(r"\b(?:[a-z_]\w*\.)+([A-Z]\w*)", r"\1", text)
    text = text.replace("datetime.datetime", "datetime").replace("typing.", "")
    return text.replace("NoneType", "None")


def trace_reference() -> str:
    """The trace record's fields: name, type, meaning."""
    from tracegen.schema import Trace

    meaning = _docstrings(Trace)
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, field in Trace.model_fields.items():
        shown = field.alias or name
        text = _cell(meaning.get(name, ""))
        rows.append(f"| `{shown}` | `{_cell(_type(field.annotation))}` | {text} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if SETTINGS in markdown:
        markdown = markdown.replace(SETTINGS, settings_reference())
    if TRACE in markdown:
        markdown = markdown.replace(TRACE, trace_reference())
    return markdown
