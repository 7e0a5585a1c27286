"""`run` and `doctor` options are made from the settings model: one declaration per setting."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tracegen.cli import app
from tracegen.cli.settings_options import presentation
from tracegen.config import RunSettings

runner = CliRunner()
FIELDS = RunSettings.model_fields


@pytest.mark.parametrize("name", list(FIELDS))
def test_every_setting_says_what_it_is(name: str) -> None:
    description = FIELDS[name].description
    assert description and description.endswith((".", ")")), name


def help_text(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_run_has_an_option_for_every_setting_that_has_one() -> None:
    text = help_text("run")
    for name, field in FIELDS.items():
        shown = presentation(name, field)
        if shown["option"]:
            assert all(flag in text for flag in shown["flags"]), name
            assert f"[env: {', '.join(shown['env'])}]" in text, name
        else:
            assert f"--{name.replace('_', '-')} " not in text, name


def test_run_help_shows_every_default_and_its_panels() -> None:
    text = help_text("run")
    for shown in ("[default: 0.7]", "[default: 8192]", "[default: 4]", "[default: auto]"):
        assert shown in text
    for panel in ("Generation", "Model and server", "Run", "Problems", "Output"):
        assert f"─ {panel} ─" in text, panel
    assert "[default: None]" not in text


@pytest.mark.parametrize(
    ("variable", "name", "value"),
    [
        ("TRACEGEN_HOSTS", "hosts", ["http://gpu1:11434"]),
        ("OLLAMA_HOST", "hosts", ["http://gpu1:11434"]),
        ("OPENAI_API_KEY", "openai_api_key", "sk-1"),
        ("TRACEGEN_OPENAI_API_KEY", "openai_api_key", "sk-1"),
    ],
)
def test_every_variable_that_sets_a_setting_is_on_its_declaration(
    variable: str, name: str, value: object
) -> None:
    from tracegen.config import env_names, load_settings

    assert variable in env_names(name, FIELDS[name])
    raw = ",".join(value) if isinstance(value, list) else str(value)
    chosen = getattr(
        load_settings(RunSettings, {}, env={variable: "gpu1" if name == "hosts" else raw}), name
    )
    shown = chosen.get_secret_value() if hasattr(chosen, "get_secret_value") else chosen
    assert shown == value


def test_a_tracegen_variable_wins_over_another_tools() -> None:
    from tracegen.config import load_settings

    env = {"OLLAMA_HOST": "a", "TRACEGEN_HOSTS": "b"}
    assert load_settings(RunSettings, {}, env=env).hosts == ["http://b:11434"]


def test_doctor_takes_the_settings_that_choose_model_server_and_sandbox() -> None:
    result = runner.invoke(app, ["doctor", "--help"])
    assert result.exit_code == 0
    for flag in ("--host", "--backend", "--model", "--chat-template", "--sandbox", "--config"):
        assert flag in result.output
    assert "--num-samples" not in result.output


def test_an_option_is_validated_by_the_settings_model() -> None:
    result = runner.invoke(app, ["run", "--num-samples", "0"])
    assert result.exit_code == 2
    assert "num-samples (flag): Input should be greater than or equal to 1" in result.stderr


@pytest.mark.parametrize(
    ("command", "settings"),
    [("verify", ("problems", "sandbox")), ("problems", ("limit", "problem_ids"))],
)
def test_commands_sharing_run_settings_take_their_declaration(
    command: str, settings: tuple[str, ...]
) -> None:
    text = help_text(command)
    for name in settings:
        assert str(FIELDS[name].description) in text, name
    assert "[env:" not in text  # these commands read their flags only


def test_each_choice_list_in_help_is_the_keys_of_its_registry() -> None:
    """`run --help` lists the names a setting takes from the registry that holds them: a
    mode, a backend kind, an isolation or a problem set added there is offered at once."""
    from tracegen.config import SANDBOXES
    from tracegen.llm.factory import backend_names
    from tracegen.modes.registry import MODES
    from tracegen.problems.loader import source_names

    text = help_text("run")
    registries = {
        "mode": list(MODES),
        "backend": list(backend_names()),
        "sandbox": [f"{k} ({v})" for k, v in SANDBOXES.items()],
        "problems": source_names(),
    }
    for name, names in registries.items():
        assert presentation(name, FIELDS[name])["choices"] == names, name
        assert f"[choices: {', '.join(names)}]" in text, name


def test_registries_and_the_types_naming_their_keys_agree() -> None:
    """Where a type also names a registry's keys (for the type checker), they are the same
    names: ``--executor``'s and `EXECUTORS`, the isolations and `SANDBOXES`."""
    import typing

    from tracegen.config import SANDBOXES
    from tracegen.generate.run import EXECUTORS
    from tracegen.sandbox.base import IsolationName

    assert set(typing.get_args(FIELDS["executor"].annotation)) == set(EXECUTORS)
    assert {"auto", *typing.get_args(IsolationName)} == set(SANDBOXES)
