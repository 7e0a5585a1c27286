"""The report opened in headless Chromium: offline, no errors, plots drawn, traces browsable.

Screenshots go to the test's temporary folder; the one kept as ``docs/report.png`` goes to
``$TRACEGEN_SCREENSHOTS`` when it is set (``TRACEGEN_SCREENSHOTS=docs`` refreshes it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.browser import Browser
from tests.support.system_tools import NEEDS_CHROMIUM
from tests.support.traces import (
    every_mode_and_failure,
    markers_trace,
    night_of_traces,
    write_traces,
)

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
]

ROWS = "document.querySelectorAll('#trace-list tr').length"


def _report(traces_file: Path, out: Path, *args: str) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "tracegen", "report", str(traces_file), "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return out


def _kept_screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TRACEGEN_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _set(browser: Browser, element: str, value: str) -> None:
    browser.js(
        f"(() => {{ const e = document.getElementById({element!r}); e.value = {value!r};"
        " e.dispatchEvent(new Event('input')); })()"
    )


def test_report_loads_offline_draws_every_plot_and_browses_traces(tmp_path: Path) -> None:
    traces = every_mode_and_failure() * 2
    page = _report(write_traces(tmp_path / "traces.jsonl", traces), tmp_path / "report.html")
    with Browser() as browser:
        browser.open(page)
        assert browser.errors == []
        assert browser.requests == [page.resolve().as_uri()]

        charts = browser.js(
            "[...document.querySelectorAll('svg.chart')].map(s => {"
            " const r = s.getBoundingClientRect();"
            " return [r.width, r.height, s.querySelectorAll('rect').length]; })"
        )
        assert len(charts) >= 15
        assert all(w > 150 and h > 20 and rects > 0 for w, h, rects in charts), charts
        browser.screenshot(tmp_path / "report-overview.png")

        assert browser.js(ROWS) == len(traces)
        _set(browser, "f-mode", "native-tools")
        assert browser.js(ROWS) == sum(t.mode == "native-tools" for t in traces)
        _set(browser, "f-mode", "")
        _set(browser, "f-outcome", "error")
        assert browser.js(ROWS) == sum(t.error is not None for t in traces)
        _set(browser, "f-outcome", "")
        _set(browser, "f-failure", "tests/timeout")
        assert browser.js(ROWS) == 2
        _set(browser, "f-failure", "")
        _set(browser, "f-problem", "div")
        assert browser.js(ROWS) == sum(t.problem_id == "div" for t in traces)
        _set(browser, "f-problem", "")
        _set(browser, "f-search", "wrong sign")
        assert browser.js(ROWS) == sum(
            any("wrong sign" in s.text.lower() for s in t.steps) for t in traces
        )
        _set(browser, "f-search", "inline-tools-ideal")
        browser.js("document.querySelector('#trace-list tr td').click()")
        viewer = "document.getElementById('pane-a')"
        assert browser.js(f"{viewer}.querySelector('h3').textContent") == "add · inline-tools"
        kinds = browser.js(
            f"[...{viewer}.querySelectorAll('.panel')].map(p => p.className.split(' ')[1])"
        )
        assert kinds == [
            "kind-problem",
            "kind-think",
            "kind-tool_call",
            "kind-tool_response",
            "kind-think",
            "kind-code",
            "kind-tests",
            "kind-metrics",
        ]
        assert browser.js(f"{viewer}.querySelectorAll('.panel.system').length") == 1
        assert "written by tracegen" in browser.js(f"{viewer}.querySelector('.system').innerText")
        assert browser.js(f"{viewer}.querySelectorAll('.tok-keyword').length") >= 2
        assert browser.js(f"{viewer}.querySelector('table.tests td.mono').textContent") == "3"

        _set(browser, "f-search", "structured-sandbox")
        browser.js("document.querySelector('#trace-list button.compare').click()")
        assert browser.js("document.getElementById('pane-b').hidden") is False
        assert "episode failed" in browser.js("document.getElementById('pane-b').innerText")
        browser.js("document.getElementById('traces').scrollIntoView()")
        browser.screenshot(tmp_path / "report-traces.png")
        assert browser.errors == []


def test_report_of_20000_traces_stays_light_and_responsive(tmp_path: Path) -> None:
    traces_file = write_traces(tmp_path / "night.jsonl", night_of_traces(20_000))
    page = _report(traces_file, tmp_path / "report.html")
    assert page.stat().st_size < 3_000_000
    with Browser() as browser:
        browser.open(page)
        assert browser.errors == []
        assert browser.js(ROWS) == 400
        assert "400 of 20,000 traces are embedded" in browser.js("document.body.innerText")
        spent = browser.js(
            "(() => { const e = document.getElementById('f-search'); const t = performance.now();"
            " e.value = 'problem_1'; e.dispatchEvent(new Event('input'));"
            " return performance.now() - t; })()"
        )
        assert spent < 250
        browser.js("window.scrollTo(0, 0)")
        browser.screenshot(_kept_screenshots(tmp_path) / "report.png")


def test_hostile_text_is_shown_as_escapes_and_the_metrics_row_has_its_numbers(
    tmp_path: Path,
) -> None:
    """A right-to-left override in a problem id does not reorder the viewer's line; markup and
    control characters are text; the token row reads the fields traces have."""
    trace = markers_trace(0, problem_id="evil\u202etxt.exe")
    trace.model = "m\u2066x\u2069<img src=x onerror=alert(1)>"
    trace.steps[0].text = "think \x1b]52;c;UFdO\x07 \u202edone"
    page = _report(write_traces(tmp_path / "t.jsonl", [trace]), tmp_path / "report.html")
    with Browser() as browser:
        browser.open(page)
        browser.js("document.querySelector('#trace-list tr td').click()")
        viewer = "document.getElementById('pane-a')"
        heading = browser.js(f"{viewer}.querySelector('h3').textContent")
        assert heading == "evil\\u202etxt.exe · markers"
        shown = browser.js("document.body.innerText")
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
        assert "think \\x1b]52;c;UFdO\\x07 \\u202edone" in shown
        assert "<img src=x onerror=alert(1)>" in shown
        assert browser.js("document.querySelectorAll('img').length") == 0
        metrics = browser.js(f"{viewer}.querySelector('.kind-metrics').innerText")
        assert "tokens (prompt / completion)" in metrics and "80 / 120" in metrics
        assert "undefined" not in browser.js(f"{viewer}.innerText")
        assert browser.errors == []
