"""System tools some tests need (bubblewrap, chromium). Without its tool a test skips, naming
the tool; with ``TRACEGEN_REQUIRE_SYSTEM_TOOLS=1`` (CI sets it) that skip fails the run instead
(see ``pytest_runtest_makereport`` in ``tests/conftest.py``)."""

from __future__ import annotations

import os
import shutil

import pytest

from tracegen.errors import SandboxError
from tracegen.sandbox import detect_isolation

MISSING = "missing system tool"
"""Starts the reason of every skip for a missing tool, so that CI can tell them apart."""
REQUIRE = "TRACEGEN_REQUIRE_SYSTEM_TOOLS"


def tools_required() -> bool:
    return os.environ.get(REQUIRE) == "1"


def needs_tool(tool: str, problem: str | None) -> pytest.MarkDecorator:
    """Skip where ``problem`` says ``tool`` is missing or does not run here."""
    return pytest.mark.skipif(problem is not None, reason=f"{MISSING} {tool}: {problem}")


def _bwrap_problem() -> str | None:
    try:
        detect_isolation("bwrap")
    except SandboxError as e:
        return str(e)
    return None


def _chromium_problem() -> str | None:
    found = shutil.which("chromium") or shutil.which("/usr/bin/chromium")
    return None if found else "chromium is not installed"


NEEDS_BWRAP = needs_tool("bwrap", _bwrap_problem())
NEEDS_CHROMIUM = needs_tool("chromium", _chromium_problem())


def _gpp_problem() -> str | None:
    from tracegen.sandbox.programs import compiler_missing

    return compiler_missing("cpp")


NEEDS_GPP = needs_tool("g++", _gpp_problem())


def _javac_problem() -> str | None:
    from tracegen.sandbox.programs import compiler_missing

    return compiler_missing("java")


NEEDS_JAVAC = needs_tool("javac", _javac_problem())
