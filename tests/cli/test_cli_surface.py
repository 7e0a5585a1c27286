"""The command-line surface a new user meets first."""

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from tracegen.cli import app

_GROUP = typer.main.get_command(app)
COMMANDS = _GROUP.list_commands(typer.Context(_GROUP))  # type: ignore[attr-defined]
"""Every command the app has, read from the app itself."""
runner = CliRunner()


def test_the_app_has_the_commands_a_user_knows():
    assert {"run", "convert", "stats", "merge", "status", "doctor"} <= set(COMMANDS)


def test_help_lists_every_command_with_one_line_each():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert f" {command} " in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_python_dash_m_runs_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "tracegen", "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "convert" in out.stdout


HEAVY = ("httpx", "datasets", "pyarrow", "tracegen.generate.local_executor", "pydantic", "rich")


@pytest.mark.parametrize("argv", [["--help"], ["stats", "--help"], ["convert", "--help"]])
def test_help_does_not_import_heavy_modules(argv):
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['tracegen', *{argv!r}]\n"
        "try:\n"
        "    runpy.run_module('tracegen', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == ""
    assert "Usage:" in out.stdout


def test_convert_offers_each_format_of_the_registry_under_its_panel():
    """convert's format flags are made from `tracegen.export.registry.FORMATS`: each entry's
    flag (and, for ``--rl``, its value) is in the help, under the panel the entry declares."""
    from tracegen.export.registry import FORMATS

    help_text = runner.invoke(app, ["convert", "--help"]).output
    for fmt in FORMATS.values():
        flag, _, value = fmt.flag.partition(" ")
        assert f"  {flag} " in help_text and value in help_text
        if fmt.panel:
            assert f"{fmt.panel}:" in help_text
            assert help_text.index(f"{fmt.panel}:") < help_text.index(f"  {flag} ")


def test_bad_setting_is_one_line_with_exit_status_2():
    result = runner.invoke(app, ["run", "--concurrency", "-1"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "tracegen: error: concurrency (flag): Input should be greater than or equal to 1"
    ]


def test_unknown_config_key_is_named(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("modle = 'x'\n")
    result = runner.invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"tracegen: error: {config}: unknown key 'modle'"


def test_run_passes_only_known_settings(monkeypatch):
    import tracegen.config
    from tracegen.config import RunSettings, load_settings

    captured = {}

    def capture(model, flags, **kwargs):
        captured.update(flags)
        raise SystemExit(0)

    monkeypatch.setattr(tracegen.config, "load_settings", capture)
    runner.invoke(app, ["run", "--model", "m", "--host", "h1", "--host", "h2"])
    assert set(captured) <= set(RunSettings.model_fields)
    settings = load_settings(RunSettings, captured, env={})
    assert (settings.model, settings.hosts) == ("m", ["http://h1:11434", "http://h2:11434"])
