"""The benchmark's charts, drawn with matplotlib (the ``bench`` extra): time per step of one erasure, throughput
against the orchestration ceiling, scaling with platform size, and the targeted figures across recorded runs.

Each chart is a ``matplotlib.figure.Figure`` of its own, written as a PNG by the Agg renderer: no pyplot, no
display, no global state.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.results_history import Entry
from bench.stats import fmt, ratio

PASS_COLOUR, MISS_COLOUR, STEP_COLOUR, TOTAL_COLOUR = "#2e8b57", "#c0392b", "#316ec8", "#888888"


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


def steps(path: Path, times: Sequence[tuple[str, float]], wall: float, gaps: float, title: str) -> Path:
    """Horizontal bars: each step of one erasure in the order it first ran, then the unattributed time (no
    activity or child workflow running) and the wall time. Steps run side by side: bars add up to more."""
    bars = [*times, ("(no step running)", max(0.0, gaps)), ("TOTAL wall", wall)]
    fig = Figure(figsize=(9, 1.4 + 0.32 * len(bars)), layout="constrained")
    ax = fig.add_subplot()
    colours = [STEP_COLOUR] * len(times) + [TOTAL_COLOUR] * 2
    drawn = ax.barh(range(len(bars)), [v for _, v in bars], color=colours)
    ax.bar_label(drawn, labels=[f"{v:.3f} s" for _, v in bars], padding=3, fontsize=8)
    ax.set_yticks(range(len(bars)), [name for name, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set_xlabel("seconds")
    ax.set_title(title)
    return _save(fig, path)


def throughput(
    path: Path, per_min: Sequence[float], ceiling: Sequence[float], concurrent: int, target: float | None = None
) -> Path:
    """Per run, erasures per minute beside the ceiling (the same number of no-op sagas), with their ratio."""
    shares = [ratio(t, c) for t, c in zip(per_min, ceiling, strict=False)]
    fig = Figure(figsize=(2.5 + 1.6 * len(shares), 4.5), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(len(shares)))
    width = 0.38
    ax.bar([i - width / 2 for i in x], per_min[: len(x)], width, color=STEP_COLOUR, label=f"{concurrent} erasures")
    ax.bar([i + width / 2 for i in x], ceiling[: len(x)], width, color=TOTAL_COLOUR, label="ceiling (no-op sagas)")
    for i, share in enumerate(shares):
        ok = target is None or share >= target
        top = max(per_min[i], ceiling[i])
        ax.annotate(
            f"{share:.0%}", (i, top), ha="center", va="bottom", color=PASS_COLOUR if ok else MISS_COLOUR, weight="bold"
        )
    ax.set_xticks(x, [f"run {i + 1}" for i in x])
    ax.set_ylabel("erasures per minute")
    ax.margins(y=0.15)
    ax.legend(loc="lower right", fontsize=8)
    median = statistics.median(shares) if shares else math.nan
    goal = f", target >= {target:.0%}" if target is not None else ""
    ax.set_title(f"throughput / orchestration ceiling: median {median:.0%}{goal}")
    return _save(fig, path)


@dataclass(frozen=True)
class Scale:
    """The measured user's erasure on a platform of ``background`` users: saga and direct seconds, per run."""

    background: int
    saga: Sequence[float]
    direct: Sequence[float]


def _bar_with_range(ax: Axes, x: float, values: Sequence[float], width: float, colour: str, label: str) -> float:
    mid = statistics.median(values)
    spread = [[mid - min(values)], [max(values) - mid]]
    ax.bar([x], [mid], width, color=colour, label=label, yerr=spread, capsize=4)
    return float(max(values))


def scaling(path: Path, points: Sequence[Scale], size: str) -> Path:
    """Saga and direct time (median, min-max) at each platform size, with saga/direct; the title gives the
    saga's time at the largest size over the smallest (median of the per-run ratios, as the table)."""
    fig = Figure(figsize=(3 + 1.8 * len(points), 4.5), layout="constrained")
    ax = fig.add_subplot()
    width = 0.38
    for i, p in enumerate(points):
        if not p.saga or not p.direct:
            continue
        first = i == 0
        top = _bar_with_range(ax, i - width / 2, p.saga, width, STEP_COLOUR, "saga" if first else "_")
        top = max(top, _bar_with_range(ax, i + width / 2, p.direct, width, TOTAL_COLOUR, "direct" if first else "_"))
        over = statistics.median(ratio(s, d) for s, d in zip(p.saga, p.direct, strict=False))
        ax.annotate(f"saga / direct {fmt(over)}x", (i, top), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(points)), [f"{p.background:,} users" for p in points])
    ax.set_ylabel(f"seconds to erase one {size} user")
    ax.set_xlabel("background users on the platform")
    ax.margins(y=0.15)
    ax.legend(loc="lower right", fontsize=8)
    title = "saga vs direct deletions by platform size"
    ends = (points[0], points[-1]) if len(points) > 1 else None
    if ends and ends[0].saga and ends[1].saga:
        grow = statistics.median(ratio(b, a) for a, b in zip(ends[0].saga, ends[1].saga, strict=False))
        title += f"\nsaga at {ends[1].background:,} / {ends[0].background:,} users: {fmt(grow)}x"
    ax.set_title(title)
    return _save(fig, path)


def history(path: Path, entries: Sequence[Entry], last: int = 20) -> Path:
    """One panel per targeted figure: its median (min-max) in each of the ``last`` recorded runs, oldest
    left, labelled by commit (``*``: uncommitted changes) and mode; filled marks full runs, hollow quick ones,
    green PASS, red MISS; the dashed line is the target."""
    shown = list(entries[-last:])
    names: list[str] = []
    for e in reversed(shown):
        names += [f.name for f in e.targeted if f.name not in names]
    cols = 2 if len(names) > 1 else 1
    rows = max(1, math.ceil(len(names) / cols))
    fig = Figure(figsize=(6 * cols, 0.8 + 2.4 * rows), layout="constrained")
    grid = fig.subplots(rows, cols, squeeze=False)
    panels: list[Axes] = [ax for row in grid for ax in row]
    labels = [f"{e.label}\n{e.mode}" for e in shown]
    for ax, name in zip(panels, names, strict=False):
        bound: float | None = None
        for i, e in enumerate(shown):
            f = next((f for f in e.targeted if f.name == name), None)
            if f is None:
                continue
            bound = f.bound
            colour = PASS_COLOUR if f.verdict == "PASS" else MISS_COLOUR
            low = f.median - f.minimum if f.minimum is not None else 0.0
            high = f.maximum - f.median if f.maximum is not None else 0.0
            ax.errorbar(
                [i],
                [f.median],
                yerr=[[low], [high]],
                fmt="o",
                color=colour,
                markerfacecolor=colour if e.mode == "full" else "white",
                capsize=3,
            )
        if bound is not None:
            ax.axhline(bound, color=TOTAL_COLOUR, linestyle="--", linewidth=1)
        ax.set_title(textwrap.shorten(name, 60), fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    for ax in panels[len(names) :]:
        ax.set_visible(False)
    for j, ax in enumerate(panels):
        bottom = j + cols >= len(names)  # the lowest panel drawn in its column carries the labels
        ticks = labels if bottom else [""] * len(shown)
        ax.set_xticks(range(len(shown)), ticks, fontsize=7)
        if len(shown) > 6:
            ax.tick_params(axis="x", labelrotation=45)
            for tick in ax.get_xticklabels():
                tick.set(ha="right", rotation_mode="anchor")
        ax.set_xlim(-0.5, max(0.5, len(shown) - 0.5))
    if not names:
        panels[0].set_visible(True)
        panels[0].text(0.5, 0.5, "no recorded run with a target yet", ha="center", va="center")
    fig.suptitle(f"targeted figures, last {len(shown)} recorded run(s) by commit")
    return _save(fig, path)
