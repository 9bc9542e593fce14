"""The capacity model and the Temporal action count: pure arithmetic over measured figures and histories."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from temporalio.api.enums.v1 import EventType

from bench.actions import count_events, heartbeat_estimate
from bench.capacity import SECONDS_PER_MONTH, Measured, bottleneck, markdown, workers_needed


def test_measured_figures_come_from_the_medians_and_the_backlog_worker_wins() -> None:
    values: dict[str, list[float]] = {
        "cpu_worker_per_erasure": [0.9, 0.8, 1.0],
        "cpu_temporal_per_erasure": [1.2],
        "cpu_postgres_per_erasure": [0.1],
        "actions_per_small_erasure": [30, 34, 32],
        "heartbeats_small": [12],
        "backlog_worker_cpu_seconds_per_erasure_1w": [0.5],
    }
    m = Measured.from_values(values)
    assert m.cpu == {"worker": 0.5, "temporal": 1.2, "postgres": 0.1}
    assert (m.actions, m.heartbeats) == (32, 12)
    assert bottleneck(m) == "temporal (1.200 CPU s per erasure)"


def test_workers_follow_the_peak_rate_and_never_fall_below_two() -> None:
    assert workers_needed(0.9, 10_000) == 2
    per_month = int(SECONDS_PER_MONTH * 3)  # 3 erasures a second on average, 30 at the 10x peak
    assert workers_needed(0.5, per_month) == 25  # 15 cores at the peak, each run at 60%


def test_the_table_states_what_was_measured_and_what_is_extrapolated() -> None:
    m = Measured({"worker": 0.9, "temporal": 1.2, "postgres": 0.1, "kms": 0.0}, actions=33, heartbeats=10)
    md = markdown(m)
    assert md.startswith("| per month | 10,000 erasures | 1,000,000 erasures |")
    assert "| Temporal actions per month (history + heartbeats) | 430,000 | 43,000,000 |" in md
    assert "KMS" not in md  # a component measured at zero gets no row
    assert "Measured per small erasure" in md
    assert "Extrapolated" in md


def _event(kind: int, at: float, **attrs: Any) -> SimpleNamespace:
    ts = SimpleNamespace(ToMicroseconds=lambda: int(at * 1e6))
    return SimpleNamespace(event_type=kind, event_time=ts, event_id=attrs.pop("event_id", 0), **attrs)


def test_actions_are_counted_by_kind_with_retries_and_heartbeats_apart() -> None:
    timeout = SimpleNamespace(ToTimedelta=lambda: timedelta(seconds=10))
    none = SimpleNamespace(ToTimedelta=lambda: timedelta(0))
    events = [
        _event(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0),
        _event(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 0),
        _event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            0,
            event_id=5,
            activity_task_scheduled_event_attributes=SimpleNamespace(heartbeat_timeout=timeout),
        ),
        _event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            1,
            activity_task_started_event_attributes=SimpleNamespace(scheduled_event_id=5, attempt=3),
        ),
        _event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            21,
            activity_task_completed_event_attributes=SimpleNamespace(scheduled_event_id=5),
        ),
        _event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            21,
            event_id=8,
            activity_task_scheduled_event_attributes=SimpleNamespace(heartbeat_timeout=none),
        ),
        _event(
            EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            22,
            activity_task_started_event_attributes=SimpleNamespace(scheduled_event_id=8, attempt=1),
        ),
        _event(EventType.EVENT_TYPE_TIMER_STARTED, 23),
        _event(
            EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
            24,
            child_workflow_execution_started_event_attributes=SimpleNamespace(
                workflow_execution=SimpleNamespace(workflow_id="verify-1")
            ),
        ),
    ]
    run = count_events(events)
    assert dict(run.kinds) == {"workflow_started": 1, "search_attributes": 1, "activity": 4, "timer": 1}
    assert run.children == ["verify-1"]
    assert run.heartbeats == heartbeat_estimate([20.0], 10.0) == 3  # 1 at once, then one per 8 s


def test_a_short_attempt_sends_one_heartbeat() -> None:
    assert heartbeat_estimate([0.2, 0.0], 10.0) == 2
