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


def test_run_has_an_option_for_every_setting_that_has_one() -> None:
    result = runner.invoke(app, ["run", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for name, field in FIELDS.items():
        shown = presentation(name, field)
        if shown["option"]:
            assert all(flag in text for flag in shown["flags"]), name
            assert f"[env: {shown['env']}]" in text, name
        else:
            assert f"--{name.replace('_', '-')} " not in text, name


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
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in settings:
        assert str(FIELDS[name].description) in text, name
    assert "[env:" not in text  # these commands read their flags only
