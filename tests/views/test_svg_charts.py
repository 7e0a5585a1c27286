"""The report's inline SVG charts: well-formed, escaped, scaled to their values."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from collections import Counter

from tracegen.views.report.svg import Series, bins, columns, hbars, histogram, nice_ticks, number

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def bars(svg: str) -> list[ET.Element]:
    return [r for r in parse(svg).iter(f"{NS}rect") if r.find(f"{NS}title") is not None]


def test_number_labels_are_short() -> None:
    assert [number(v) for v in (0, 3, 0.25, -1.5, 1234, 56_789)] == [
        "0",
        "3",
        "0.25",
        "-1.5",
        "1.2k",
        "57k",
    ]


def test_ticks_are_round_and_cover_the_range() -> None:
    ticks = nice_ticks(0.0, 87.0)
    assert ticks[0] <= 0 and ticks[-1] >= 87
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1 and steps.pop() in (10, 20, 25, 50)
    assert nice_ticks(5.0, 5.0)  # an empty range still gets an axis


def test_columns_draw_one_bar_per_label_and_series_with_tooltips() -> None:
    svg = columns(
        ["markers", "inline-tools"],
        [Series("success", [0.5, 0.25], "#1"), Series("ideal", [0.25, 0.0], "#2")],
        title="rates",
    )
    drawn = bars(svg)
    assert len(drawn) == 4
    tips = [r.find(f"{NS}title").text for r in drawn]  # type: ignore[union-attr]
    assert "markers · success: 0.5" in tips and "inline-tools · ideal: 0" in tips
    assert parse(svg).get("aria-label") == "rates"


def test_taller_values_draw_taller_bars_and_negative_ones_below_the_axis() -> None:
    svg = columns(["a", "b", "c"], [Series("reward", [1.0, 0.5, -0.5], "#1")], title="reward")
    heights = [float(r.get("height", 0)) for r in bars(svg)]
    assert heights[0] > heights[1] > 0
    ys = [float(r.get("y", 0)) for r in bars(svg)]
    assert ys[2] > ys[0]  # the negative bar starts lower, at the zero line


def test_labels_and_titles_are_escaped() -> None:
    svg = columns(["<script>"], [Series("a&b", [1.0], "#1")], title='x" onload="y')
    parse(svg)  # still well-formed XML
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_histogram_bins_integers_one_per_value_and_wide_ranges_by_round_widths() -> None:
    labels, heights = bins(Counter({1.0: 3, 3.0: 1}))
    assert labels == ["1", "2", "3"] and heights == [3.0, 0.0, 1.0]
    wide = Counter({float(v): 1 for v in range(0, 1000, 7)})
    labels, heights = bins(wide)
    assert len(labels) <= 21 and sum(heights) == len(wide)
    assert bins(Counter()) == ([], [])
    assert len(bars(histogram(Counter({0.5: 2, -0.5: 1}), title="r", color="#1"))) >= 2


def test_hbars_scale_to_the_largest_row_and_print_each_value() -> None:
    svg = hbars(
        [("timeout", 4, "4 traces"), ("a very long failure reason " * 3, 2, "2 traces")],
        title="failures",
        color="#1",
    )
    widths = [float(r.get("width", 0)) for r in bars(svg)]
    assert widths[0] == 2 * widths[1]
    assert re.findall(r'class="value"[^>]*>([^<]+)<', svg) == ["4", "2"]
    assert "…" in svg  # long labels are shortened, the whole label in the tooltip
