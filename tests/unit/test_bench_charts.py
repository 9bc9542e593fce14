"""The benchmark's charts: matplotlib PNGs from sample figures, and a run that goes on without matplotlib."""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import bench
from bench import charts, results_history
from bench.measured import Erasure, Figures
from bench.plan import Plan
from bench.report import rows, write_outputs
from bench.results_history import Entry, record
from bench.stats import Row, Target, summarize

PNG = b"\x89PNG\r\n\x1a\n"
CHARTS = ("steps.png", "throughput.png", "scaling.png", "history.png")


def _chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    pos = len(PNG)
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        yield data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length


def _check_png(path: Path) -> tuple[int, int]:
    """A PNG written by matplotlib (its Software text chunk); returns its width and height."""
    data = path.read_bytes()
    assert data.startswith(PNG)
    chunks = list(_chunks(data))
    assert chunks[0][0] == b"IHDR"
    assert chunks[-1][0] == b"IEND"
    assert any(kind == b"tEXt" and body.startswith(b"Software\0Matplotlib") for kind, body in chunks)
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert width > 0
    assert height > 0
    return width, height


def _figures() -> Figures:
    f = Figures()
    for name, values in {
        "saga_seconds_small": [2.9, 2.3, 3.0],
        "direct_seconds_small": [2.4, 2.2, 2.6],
        "overhead_small": [1.2, 1.05, 1.15],
        "saga_seconds_large": [2.5, 2.2, 3.1],
        "direct_seconds_large": [2.3, 1.9, 2.3],
        "overhead_large": [1.09, 1.16, 1.35],
        "throughput_per_min": [115.9, 112.9, 121.2],
        "ceiling_per_min": [202.4, 195.9, 211.1],
        "throughput_share": [0.573, 0.576, 0.574],
        "calls_kms_calls_small": [1, 1, 1],
    }.items():
        for v in values:
            f.add(name, v)
    return f


def _sample() -> Erasure:
    steps = [("begin_request", 0.06), ("erase:artifacts", 2.18), ("erase:logs", 1.54), ("VerifierWorkflow(final)", 0.4)]
    return Erasure("req-1", 2.9, "completed", {}, {}, steps, {}, 0.4, activities=13, deleting=2.2, busy=2.7)


def _plan(tmp_path: Path) -> Plan:
    return Plan.make(False, None, tmp_path / "out")


def test_a_run_writes_json_history_and_four_matplotlib_charts(tmp_path: Path) -> None:
    plan, figures, notes = _plan(tmp_path), _figures(), []
    history = tmp_path / "history.jsonl"
    table = rows(figures, plan)
    written = write_outputs(plan, figures, table, _sample(), 1650.0, history, notes.append)
    assert notes == []
    assert written[:2] == [plan.out_dir / "bench.json", history]
    assert sorted(p.name for p in written[2:]) == sorted(CHARTS)
    for name in CHARTS:
        _check_png(plan.out_dir / name)
    assert json.loads((plan.out_dir / "bench.json").read_text())["mode"] == "full"
    (entry,) = results_history.read(history)
    assert entry.mode == "full"
    assert "out_dir" not in entry.plan
    assert {f.name: f.verdict for f in entry.targeted}["1 overhead saga/direct, 10 bg"] == "PASS"


def test_without_history_or_sample_only_the_figures_it_has_are_drawn(tmp_path: Path) -> None:
    plan, figures = _plan(tmp_path), Figures()
    figures.add("throughput_per_min", 100.0)
    figures.add("ceiling_per_min", 200.0)
    written = write_outputs(plan, figures, rows(figures, plan), None, 10.0, None)
    assert [p.name for p in written] == ["bench.json", "throughput.png"]


def test_each_chart_on_its_own(tmp_path: Path) -> None:
    steps = charts.steps(tmp_path / "a.png", _sample().steps, 2.9, 0.2, "time per step")
    tput = charts.throughput(tmp_path / "b.png", [115.9, 112.9], [202.4, 195.9], 100, target=0.8)
    scale = charts.scaling(
        tmp_path / "c.png",
        [charts.Scale(10, [2.9, 2.3], [2.4, 2.2]), charts.Scale(1000, [2.5, 2.2], [2.3, 1.9])],
        "large",
    )
    one = charts.scaling(tmp_path / "d.png", [charts.Scale(10, [2.9], [2.4])], "typical")
    for path in (steps, tput, scale, one):
        _check_png(path)
    # more steps, a taller chart
    many = charts.steps(tmp_path / "e.png", _sample().steps * 5, 2.9, 0.2, "time per step")
    assert _check_png(many)[1] > _check_png(steps)[1]


def _entry(commit: str, mode: str, overhead: float, with_sql: bool = True) -> Entry:
    table = [Row("1 overhead saga/direct, 10 bg", summarize([overhead, overhead + 0.1]), "x", Target(1.3))]
    if with_sql:
        table.append(Row("5 SQL statements saga / direct", summarize([2.6]), "x", Target(1.5)))
    return record(mode, {"runs": 2}, table, 100.0, state=(commit, mode == "quick"))


def test_history_chart_across_runs_modes_and_missing_figures(tmp_path: Path) -> None:
    entries = [
        _entry(f"{n:07x}", "full" if n % 3 == 0 else "quick", 1.0 + n / 10, with_sql=n > 2) for n in range(1, 10)
    ]
    many = charts.history(tmp_path / "h.png", entries)
    few = charts.history(tmp_path / "h1.png", entries[:1])  # one figure: one panel
    empty = charts.history(tmp_path / "h0.png", [])
    untargeted = record("quick", {}, [Row("saga wall time", summarize([1.0]), "s")], 1.0, state=("abc", False))
    nothing = charts.history(tmp_path / "h2.png", [untargeted])
    for path in (many, few, empty, nothing):
        _check_png(path)


def test_without_matplotlib_the_run_notes_it_and_skips_the_charts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib...` raises ImportError
    monkeypatch.delitem(sys.modules, "bench.charts")
    monkeypatch.delattr(bench, "charts")
    plan, figures, notes = _plan(tmp_path), _figures(), []
    history = tmp_path / "history.jsonl"
    written = write_outputs(plan, figures, rows(figures, plan), _sample(), 1.0, history, notes.append)
    assert written == [plan.out_dir / "bench.json", history]
    (note,) = notes
    assert note.startswith("charts skipped: no matplotlib")
    assert note.endswith("(matplotlib is in the bench extra: pip install -e '.[bench]')")
    assert not list(plan.out_dir.glob("*.png"))
    assert len(results_history.read(history)) == 1


def test_a_chart_that_fails_is_reported_and_the_others_are_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kwargs: object) -> Path:
        raise ValueError("no room")

    monkeypatch.setattr(charts, "scaling", broken)
    plan, figures, notes = _plan(tmp_path), _figures(), []
    written = write_outputs(plan, figures, rows(figures, plan), _sample(), 1.0, None, notes.append)
    assert notes == ["chart scaling.png skipped: ValueError: no room"]
    assert sorted(p.name for p in written) == ["bench.json", "steps.png", "throughput.png"]


def test_a_damaged_history_skips_only_the_history_chart(tmp_path: Path) -> None:
    plan, figures, notes = _plan(tmp_path), _figures(), []
    history = tmp_path / "history.jsonl"
    history.write_text("<<<<<<< HEAD\n")
    written = write_outputs(plan, figures, rows(figures, plan), _sample(), 1.0, history, notes.append)
    assert notes == [
        f"history chart skipped: {history}:1: not a benchmark result (Expecting value: line 1 column 1 (char 0))"
    ]
    assert sorted(p.name for p in written) == sorted(["bench.json", "history.jsonl", *CHARTS[:3]])
    assert history.read_text().splitlines()[1].startswith('{"commit":')
