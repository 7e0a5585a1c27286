"""The documentation: a short README, a site that builds strictly, links and commands that
stay true."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest
import typer

from tests.support.doc_blocks import ROOT, RUNNABLE, fenced_blocks, run_block
from tracegen.cli import app

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
_GROUP = typer.main.get_command(app)
COMMANDS = _GROUP.list_commands(typer.Context(_GROUP))  # type: ignore[attr-defined]


def cli_reference() -> str:
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks/cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.cli_reference())


def runnable_blocks() -> list[tuple[str, str]]:
    """``(page:line, script)`` of every fenced block right after a ``<!-- runnable -->`` line."""
    found = [b for page in [ROOT / "README.md", *PAGES] for b in fenced_blocks(page)]
    return [(b.where, b.body) for b in found if b.runnable]


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_readme_links_name_files_that_exist():
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)", text)
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []


def test_commands_page_has_a_section_for_every_command():
    text = (DOCS / "commands.md").read_text()
    missing = [c for c in COMMANDS if f"## `tracegen {c}`" not in text]
    assert missing == []


def test_cli_reference_is_generated_for_every_command():
    reference = cli_reference()
    for command in COMMANDS:
        assert f"## `tracegen {command}`" in reference
    assert "--num-samples" in reference  # options come with their help


def test_the_settings_page_shows_every_setting_with_its_variables_and_default():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    from reference_tables import settings_reference

    from tracegen.config import RunSettings

    page = settings_reference()
    for name in RunSettings.model_fields:
        assert f"| `{name}` |" in page, name
    assert "`TRACEGEN_HOSTS`, `OLLAMA_HOST`" in page and "| `0.7` |" in page


def test_the_trace_record_table_says_what_every_field_means():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    from reference_tables import trace_reference

    from tracegen.schema import Trace

    rows = trace_reference().splitlines()[2:]
    assert len(rows) == len(Trace.model_fields)
    assert all(not row.endswith("|  |") for row in rows), [r for r in rows if r.endswith("|  |")]


def test_the_pages_have_runnable_examples():
    marks = sum(p.read_text().count(f"{RUNNABLE}\n") for p in [ROOT / "README.md", *PAGES])
    assert len(runnable_blocks()) == marks >= 2, "a runnable mark with no block right after it"


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [mkdocs, "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "reference/cli/index.html").read_text().count("tracegen run") > 1
    assert "TRACEGEN_HOSTS" in (tmp_path / "reference/settings/index.html").read_text()
    assert "settings_hash" in (tmp_path / "trace-record/index.html").read_text()


@pytest.mark.slow
@pytest.mark.parametrize(("where", "script"), runnable_blocks(), ids=lambda v: str(v)[:40])
def test_runnable_block_runs_as_written(where, script, tmp_path):
    out = run_block(script, tmp_path, timeout=120)
    assert out.returncode == 0, f"{where}:\n{out.stdout}\n{out.stderr}"
