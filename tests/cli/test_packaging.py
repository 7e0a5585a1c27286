"""A non-editable install ships and finds the prompts and the built-in problems."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs a wheel

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_prompts_and_problems_and_finds_them_when_installed(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("tracegen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped_prompts = {Path(n).name for n in names if n.startswith("tracegen/_data/prompts/")}
    assert shipped_prompts == {p.name for p in (ROOT / "prompts").iterdir() if p.is_file()}
    assert any(n.startswith("tracegen/_data/problems/") for n in names)
    assets = {"page.html", "page.css", "browser.js"}
    assert {f"tracegen/views/report/assets/{a}" for a in assets} <= set(names)

    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
        check=True,
        capture_output=True,
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "from tracegen.data import data_dir\n"
        "p = data_dir('prompts'); q = data_dir('problems')\n"
        "print(p); print(sorted(x.name for x in q.iterdir()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the wheel, not a checkout
    out = subprocess.run(
        [python, "-c", code], cwd=tmp_path, env=env, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert out[0].startswith(str(venv))
    assert "builtin.jsonl" in out[1]
