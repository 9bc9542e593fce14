"""The benchmark's pure helpers: summaries, targets, the table and step timing (charts: test_bench_charts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.ceiling import ACTIVITIES_PER_RUN
from bench.counters import CallCounter, group
from bench.expiry import SweepCost, apart
from bench.history import Record, counts_by_name, covered, step_times
from bench.measured import Figures
from bench.plan import Plan
from bench.report import rows
from bench.stats import Row, Target, format_table, ratio, summarize
from workflows.contracts.expiry import ExpiryCounts


def test_summarize_median_min_max() -> None:
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.minimum, s.maximum, s.runs) == (2.5, 1.0, 10.0, 4)
    with pytest.raises(ValueError, match="no values"):
        summarize([])


def test_targets_pass_and_miss() -> None:
    assert Target(1.3).verdict(1.3) == "PASS"
    assert Target(1.3).verdict(1.31) == "MISS"
    assert Target(0.6, at_most=False).verdict(0.59) == "MISS"
    assert Target(0.6, at_most=False).verdict(0.6) == "PASS"
    assert ratio(1.0, 0.0) == float("inf")


def test_table_has_header_rows_and_verdicts() -> None:
    rows = [
        Row("overhead", summarize([1.1, 1.2, 1.5]), "x", Target(1.3)),
        Row("throughput share", summarize([0.5]), "", Target(0.6, at_most=False)),
        Row("sql statements", summarize([157.0])),
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split()[:5] == ["figure", "median", "min", "max", "runs"]
    assert set(lines[1]) <= {"-", " "}
    for cell in ("1.200x", "1.100x", "1.500x"):
        assert cell in lines[2]
    assert lines[2].endswith("PASS")
    assert lines[3].endswith("MISS")
    assert "157" in lines[4]
    assert not lines[4].endswith(("PASS", "MISS"))
    assert rows[0].as_dict()["verdict"] == "PASS"


def test_step_times_sum_per_name_in_first_order() -> None:
    recs = [
        Record(5, "start", "begin_request", 0, 10.0),
        Record(7, "end", "", 5, 10.5),
        Record(9, "start", "hold_active", 0, 11.0),
        Record(11, "end", "", 9, 11.25),
        Record(13, "start", "hold_active", 0, 12.0),
        Record(15, "end", "", 13, 12.25),
        Record(17, "start", "VerifierWorkflow(main)", 0, 13.0),  # never finished: left out
    ]
    assert step_times(recs) == [("begin_request", 0.5), ("hold_active", 0.5)]
    assert counts_by_name(recs) == {"begin_request": 1, "hold_active": 2, "VerifierWorkflow(main)": 1}


PHYSICAL_STEPS_RECORDED = 2


def test_ceiling_mirrors_the_sagas_activity_count() -> None:
    """The ceiling's activity count against a recorded run of the current saga (no hold, no delay) and its
    verifier (re-recorded whenever the saga's shape changes: tests/unit/test_replay.py)."""
    histories = Path(__file__).resolve().parents[1] / "histories"
    scheduled = 0
    for name in ("erasure_fewer_actions.json", "verify_fewer_actions.json"):
        events = json.loads((histories / name).read_text())["events"]
        scheduled += sum(1 for e in events if "activityTaskScheduledEventAttributes" in e)
    # that recording's plan still ran the physical clean-up (vacuum, compaction) inside the saga; the plan a
    # worker gives a request now leaves them to the platform's physical job (issue 30)
    assert scheduled - PHYSICAL_STEPS_RECORDED == ACTIVITIES_PER_RUN


def test_covered_counts_overlapping_steps_once() -> None:
    recs = [
        Record(1, "start", "erase_artifacts", 0, 10.0),
        Record(2, "start", "purge_logs", 0, 10.0),
        Record(3, "end", "", 2, 10.5),
        Record(4, "end", "", 1, 12.0),  # artifacts 10-12 covers logs 10-10.5
        Record(5, "start", "shred_keys", 0, 13.0),
        Record(6, "end", "", 5, 13.25),
        Record(7, "start", "issue_receipt", 0, 14.0),  # never finished: left out
    ]
    assert covered(recs) == 2.25
    assert covered(recs, {"purge_logs", "shred_keys"}) == 0.75


def test_counter_deltas_and_grouping() -> None:
    c = CallCounter()
    c.add("kms:Decrypt")
    before = c.snapshot()
    c.add("s3:DeleteObjects@arts", 2)
    c.add("s3:DeleteObjects@logs")
    c.add("s3:ListObjectVersions@arts", 3)
    c.add("sql", 7)
    delta = c.since(before)
    assert "kms:Decrypt" not in delta
    g = group(delta, "arts", "logs")
    assert g["s3_artifact_deletes"] == 2
    assert g["s3_log_deletes"] == 1
    assert g["s3_listings"] == 3
    assert g["s3_requests"] == 6
    assert g["sql_statements"] == 7
    assert g["kms_calls"] == 0


def test_expiry_figure_costs_per_row_and_how_far_apart() -> None:
    cost = SweepCost(background=10_000, expired=40, seconds=2.0, sql_statements=400, counts=ExpiryCounts())
    assert cost.seconds_per_row == 0.05
    assert cost.statements_per_row == 10.0
    assert apart(0.05, 0.055) == pytest.approx(1.1)
    assert apart(0.055, 0.05) == pytest.approx(1.1)
    assert apart(0.0, 1.0) == float("inf")
    f = Figures()
    f.add("expiry_ms_per_row_small", 50.0)
    f.add("expiry_ms_per_row_large", 56.0)
    f.add("expiry_apart", 1.12)
    table = rows(f, Plan.make(True, None, Path("out")))
    by_name = {r.name: r for r in table}
    row = by_name["6 expiry cost per row, 50,000 vs 5,000 apart"]
    assert row.verdict == "PASS"
    assert row.as_dict()["target"] == "<= 1.200x"
    assert by_name["6 expiry sweep per expired row, 5,000 rows"].summary.median == 50.0


def test_attempts_come_from_the_started_events_by_activity_label() -> None:
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.history.v1 import HistoryEvent

    from bench.history import attempts

    def scheduled(event_id: int, activity_type: str, activity_id: str) -> HistoryEvent:
        ev = HistoryEvent(event_id=event_id, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        ev.activity_task_scheduled_event_attributes.activity_type.name = activity_type
        ev.activity_task_scheduled_event_attributes.activity_id = activity_id
        return ev

    def started(event_id: int, scheduled_id: int, attempt: int) -> HistoryEvent:
        ev = HistoryEvent(event_id=event_id, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)
        ev.activity_task_started_event_attributes.scheduled_event_id = scheduled_id
        ev.activity_task_started_event_attributes.attempt = attempt
        return ev

    events = [scheduled(5, "begin_request", "1"), started(6, 5, 1), scheduled(7, "fence_user", "2"), started(8, 7, 3)]
    got = attempts(events)
    assert sorted(got.values()) == [1, 3]
    assert sum(n - 1 for n in got.values()) == 2
