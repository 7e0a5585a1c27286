"""Command-line options made from a settings model: each setting is declared once, in
`tracegen.config`, and its option (flags, type, help, panel, environment variable) is read
from that declaration. Imported only when a command that takes settings is built, so that
``tracegen --help`` does not import pydantic."""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.markup import escape

from tracegen.cli.options import ConfigOpt
from tracegen.config import (
    GENERATION_PANEL,
    RUN_PANEL,
    GenerationSettings,
    RunSettings,
    env_names,
    shown_default,
)


def presentation(name: str, field: FieldInfo) -> dict[str, Any]:
    """A field's ``cli(...)`` entry, with its defaults filled in."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    shown: dict[str, Any] = {"option": True, "repeat": False, **(extra.get("cli") or {})}  # type: ignore[dict-item]
    if not shown.get("panel"):
        generation = name in GenerationSettings.model_fields
        shown["panel"] = GENERATION_PANEL if generation else RUN_PANEL
    shown["flags"] = shown.get("flags") or ["--" + name.replace("_", "-")]
    shown["env"] = env_names(name, field)
    shown["default"] = shown_default(field)
    shown["choices"] = choices(shown["choices"]) if shown.get("choices") else None
    return shown


def choices(where: str) -> list[str]:
    """The names the registry ``module:NAME`` holds, each with what it is where the registry
    says (a dict of name → one line: ``auto (bubblewrap where it runs…)``)."""
    module, _, name = where.partition(":")
    registry = getattr(importlib.import_module(module), name)
    if isinstance(registry, dict):
        return [f"{k} ({v})" if isinstance(v, str) else str(k) for k, v in registry.items()]
    return [str(k) for k in registry()]


def help_text(field: FieldInfo, shown: dict[str, Any], *, env: bool = True) -> str:
    """An option's help: the setting's description, the names it takes (from its registry),
    its default and (``env``) the variables that set it, as rich help shows them (brackets
    escaped, not markup)."""
    text = escape(field.description or "")
    if shown["choices"]:
        text += escape(f" [choices: {', '.join(shown['choices'])}]")
    if shown["default"] is not None:
        text += escape(f" [default: {shown['default']}]")
    if env:
        text += escape(f" [env: {', '.join(shown['env'])}]")
    return text


def option_type(annotation: Any, repeat: bool) -> Any:
    """What the option reads: a list repeats its flag, a comma-separated list is one string,
    a choice is a string (the settings model names the choices when it refuses one)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (types.UnionType, typing.Union) and len(args) == 1:
        annotation = args[0]
    origin = typing.get_origin(annotation)
    if origin is list:
        return list[str] if repeat else str
    if origin is Literal:
        return str
    if annotation in (bool, int, float, str, Path):
        return annotation
    return str


def parameters(
    model: type[BaseModel], names: Iterable[str] | None = None, *, env: bool = True
) -> list[inspect.Parameter]:
    """One keyword parameter per setting of ``model`` that has an option (``names``: these
    settings only, in this order), each ``None`` unless given, so that the environment and a
    config file can fill it (`tracegen.config.load_settings`); ``env=False`` for a command
    that reads its flags only (its help then names no variable)."""
    fields = model.model_fields
    chosen = list(fields) if names is None else list(names)
    out = []
    for name in chosen:
        field = fields[name]
        shown = presentation(name, field)
        if not shown["option"]:
            continue
        kind = option_type(field.annotation, shown["repeat"])
        option = typer.Option(
            *shown["flags"],
            help=help_text(field, shown, env=env),
            rich_help_panel=shown["panel"],
            show_default=False,
        )
        annotation = Annotated[kind | None, option]  # type: ignore[valid-type]
        out.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
            )
        )
    return out


def run_settings_command(
    summary: str, act: Callable[[RunSettings], int], names: Iterable[str] | None = None
) -> Callable[..., None]:
    """A command taking the settings ``names`` of `RunSettings` (all when None) and
    ``--config``, that exits with what ``act`` returns for the settings they make."""

    def command(**flags: Any) -> None:
        from tracegen.config import load_settings  # looked up when run: tests replace it

        config_file = flags.pop("config")
        raise typer.Exit(act(load_settings(RunSettings, flags, config_file=config_file)))

    config = inspect.Parameter(
        "config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt
    )
    command.__signature__ = inspect.Signature([*parameters(RunSettings, names), config])  # type: ignore[attr-defined]
    command.__doc__ = summary
    return command


def with_run_options(command: Callable[..., None], summary: str, names: Iterable[str]) -> None:
    """Give ``command`` the options of the settings ``names`` of `RunSettings` in place of its
    own parameters of those names (flags only: no environment variable or config file)."""
    names = list(names)
    settings = dict(zip(names, parameters(RunSettings, names, env=False), strict=True))
    own = inspect.signature(command, eval_str=True).parameters.values()
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [settings.get(p.name) or p.replace(kind=p.KEYWORD_ONLY) for p in own]
    )
    command.__doc__ = summary
