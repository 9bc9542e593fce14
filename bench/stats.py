"""Pure helpers: medians over repeated runs, targets, and the printed table."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    median: float
    minimum: float
    maximum: float
    runs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarise")
    return Summary(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))


@dataclass(frozen=True)
class Target:
    """A bound on a figure: ``value <= bound`` (``at_most``) or ``value >= bound``."""

    bound: float
    at_most: bool = True

    def verdict(self, value: float) -> str:
        ok = value <= self.bound if self.at_most else value >= self.bound
        return "PASS" if ok else "MISS"

    def describe(self, unit: str) -> str:
        return f"{'<=' if self.at_most else '>='} {fmt(self.bound)}{unit}"


@dataclass(frozen=True)
class Row:
    name: str
    summary: Summary
    unit: str = ""
    target: Target | None = None

    @property
    def verdict(self) -> str:
        return self.target.verdict(self.summary.median) if self.target else ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "unit": self.unit, **self.summary.as_dict()}
        if self.target:
            out["target"] = self.target.describe(self.unit)
            out["verdict"] = self.verdict
        return out


def fmt(value: float) -> str:
    """Compact, stable number formatting: 3 significant figures below 1000, integers above."""
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 1000 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 10:
        return f"{value:.2f}"
    return f"{value:.3f}"


def format_table(rows: Sequence[Row]) -> str:
    header = ("figure", "median", "min", "max", "runs", "target", "")
    body = [
        (
            r.name,
            fmt(r.summary.median) + r.unit,
            fmt(r.summary.minimum) + r.unit,
            fmt(r.summary.maximum) + r.unit,
            str(r.summary.runs),
            r.target.describe(r.unit) if r.target else "",
            r.verdict,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = []
    for n, line in enumerate([header, *body]):
        cells = [line[i].ljust(widths[i]) if i == 0 or i >= 5 else line[i].rjust(widths[i]) for i in range(len(header))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths).rstrip())
    return "\n".join(lines)


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("inf")
