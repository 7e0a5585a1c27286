"""Numbers as the stats tables and the report page print them."""

from __future__ import annotations


def num(value: float | None) -> str:
    if value is None:
        return "–"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate:.1%}"
