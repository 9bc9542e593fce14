"""The benchmark's results history (one JSON line a run) and docs/benchmark.md's table made from it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import cli, results_history
from bench.results_history import Entry, append, git_state, read, record, results_table, write_docs
from bench.stats import Row, Target, summarize
from workers.settings_doc import begin_marker, end_marker, splice

WHEN = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)


def _table(overhead: list[float], share: list[float], extra: bool = False, bound: float = 0.8) -> list[Row]:
    table = [
        Row("saga wall time, large user, 10 bg", summarize([2.5, 2.9, 3.0]), "s"),
        Row("1 overhead saga/direct, 10 bg", summarize(overhead), "x", Target(1.3)),
        Row("3 throughput share of ceiling", summarize(share), "", Target(bound, at_most=False)),
    ]
    if extra:
        table.append(Row("5 SQL statements saga / direct", summarize([2.6]), "x", Target(1.5)))
    return table


def _entry(
    commit: str, mode: str, overhead: list[float], share: list[float], extra: bool = False, bound: float = 0.8
) -> Entry:
    plan = {"quick": mode == "quick", "runs": len(overhead), "target_size": "large", "background_large": 1000}
    return record(mode, plan, _table(overhead, share, extra, bound), 1700.04, state=(commit, False), now=WHEN)


def test_record_takes_every_row_with_its_target_and_verdict() -> None:
    e = _entry("abc1234", "full", [1.1, 1.2, 1.4], [0.5, 0.6, 0.7])
    assert (e.commit, e.dirty, e.mode, e.total_seconds) == ("abc1234", False, "full", 1700.0)
    assert e.date == "2026-12-01T09:30:15+00:00"
    assert e.figures[0].name == "saga wall time, large user, 10 bg"
    overhead, share = e.targeted
    assert (overhead.median, overhead.minimum, overhead.maximum, overhead.runs) == (1.2, 1.1, 1.4, 3)
    assert (overhead.bound, overhead.at_most, overhead.verdict, overhead.target) == (1.3, True, "PASS", "<= 1.300x")
    assert (share.verdict, share.target) == ("MISS", ">= 0.800")


def test_history_appends_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.jsonl"
    assert read(path) == []
    first = _entry("abc1234", "quick", [1.5], [0.7])
    second = Entry(**{**first.__dict__, "commit": "def5678", "dirty": None, "source": "copied by hand"})
    append(path, first)
    append(path, second)
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert read(path) == [first, second]


def test_a_damaged_line_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    append(path, _entry("abc1234", "quick", [1.5], [0.7]))
    with path.open("a") as out:
        out.write("\n{not json\n")
    with pytest.raises(ValueError, match=r"history\.jsonl:3: not a benchmark result"):
        read(path)


def test_the_checked_in_history_reads() -> None:
    for e in read(results_history.HISTORY):
        assert e.mode in {"quick", "full"}
        assert e.commit


def test_git_state_outside_a_repository_is_unknown(tmp_path: Path) -> None:
    assert git_state(tmp_path, tmp_path / "history.jsonl") == ("unknown", None)


def test_results_table_shows_the_latest_full_run_and_the_one_before() -> None:
    entries = [
        _entry("0000001", "full", [1.2, 1.4, 1.5], [0.6, 0.62, 0.65], bound=0.6),  # the target was lower then
        _entry("0000002", "quick", [3.0], [0.9]),
        _entry("0000003", "full", [1.0, 1.1, 1.2], [0.8, 0.85, 0.9], extra=True),
        _entry("0000004", "quick", [2.0], [0.7]),
    ]
    md = results_table(entries)
    lines = md.splitlines()
    header = lines[0]
    assert header.startswith("| figure | target | latest: `0000003`, 2026-12-01 (full, large user, 3 runs)")
    assert "the run before: `0000001`" in header
    assert "0000002" not in md
    assert "0000004" not in md
    assert lines[1] == "|---|---|---|---|"
    assert (
        lines[2] == "| 1 overhead saga/direct, 10 bg | <= 1.300x | 1.100x PASS (1-1.200) | 1.400x MISS (1.200-1.500) |"
    )
    assert lines[3] == (
        "| 3 throughput share of ceiling | >= 0.800 | 0.850 PASS (0.800-0.900) "
        "| 0.620 PASS (0.600-0.650) against >= 0.600 |"
    )
    assert lines[4] == "| 5 SQL statements saga / direct | <= 1.500x | 2.600x MISS | — |"
    assert "saga wall time" not in md  # figures without a target stay in the history, out of the table
    assert "holds 4 run(s), 2 of them full" in lines[-1]


def test_results_table_without_a_full_run_says_so_and_shows_the_modes() -> None:
    assert results_table([]).startswith("No benchmark run is recorded")
    entries = [_entry("0000002", "quick", [3.0], [0.9]), _entry("0000004", "quick", [2.0], [0.7])]
    dirty = Entry(**{**entries[1].__dict__, "dirty": True, "source": "a test"})
    md = results_table([entries[0], dirty])
    assert md.startswith("No full run (`python -m bench`) is recorded")
    assert "latest: `0000004` + uncommitted changes, 2026-12-01 (quick, large user, 1 runs)" in md
    assert "the run before: `0000002`, 2026-12-01 (quick" in md
    assert "| 1 overhead saga/direct, 10 bg | <= 1.300x | 2x MISS | 3x MISS |" in md
    assert "`0000004`: a test." in md
    one_full = results_table([entries[0], _entry("0000005", "full", [1.0, 1.1, 1.2], [0.8, 0.9, 1.0])])
    assert one_full.startswith("Only one full run")
    assert "0000002" not in one_full


def test_cli_prints_the_results_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "history.jsonl"
    append(path, _entry("0000003", "full", [1.0, 1.1, 1.2], [0.8, 0.85, 0.9]))
    assert cli.main(["--results-table", "--history", str(path)]) == 0
    assert capsys.readouterr().out == results_table(read(path))


def test_write_docs_rewrites_only_the_generated_block(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    append(history, _entry("0000003", "full", [1.0, 1.1, 1.2], [0.8, 0.85, 0.9]))
    doc = tmp_path / "benchmark.md"
    block = results_history.DOC_BLOCK
    doc.write_text(f"# Benchmark\n\nprose before\n\n{begin_marker(block)}\nstale\n{end_marker(block)}\n\nprose after\n")
    assert write_docs(doc, history)
    text = doc.read_text()
    assert "stale" not in text
    assert text.startswith("# Benchmark\n\nprose before\n\n")
    assert text.endswith(f"{end_marker(block)}\n\nprose after\n")
    assert results_table(read(history)) in text
    assert not write_docs(doc, history)  # nothing to change the second time


def test_the_benchmark_page_holds_the_generated_table() -> None:
    """docs/benchmark.md has the block ``make docs`` rewrites (its figures follow the checked-in history)."""
    text = results_history.DOC.read_text()
    assert splice(text, results_history.DOC_BLOCK, "x") != text
