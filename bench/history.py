"""Time per step from a workflow's history: activities (scheduled -> completed, grouped by type, in the
order they first ran) and child workflows (initiated -> completed, by workflow id suffix)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType

from workflows.contracts.erasure import activity_label


@dataclass(frozen=True)
class Record:
    """One history event, reduced to what step timing needs."""

    event_id: int
    kind: str  # "start" or "end"
    name: str  # activity type / child workflow label (on "start" only)
    ref: int  # on "end": the event id of the matching "start"
    at: float  # seconds since the epoch


def records(events: Iterable[Any]) -> list[Record]:
    out: list[Record] = []
    for ev in events:
        at = ev.event_time.ToMicroseconds() / 1e6
        t = ev.event_type
        if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = ev.activity_task_scheduled_event_attributes
            name = activity_label(attrs.activity_type.name, attrs.activity_id)
            out.append(Record(ev.event_id, "start", name, 0, at))
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            out.append(
                Record(ev.event_id, "end", "", ev.activity_task_completed_event_attributes.scheduled_event_id, at)
            )
        elif t == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            attrs = ev.start_child_workflow_execution_initiated_event_attributes
            phase = attrs.workflow_id.rsplit("-", 1)[-1]
            out.append(Record(ev.event_id, "start", f"{attrs.workflow_type.name}({phase})", 0, at))
        elif t == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            ref = ev.child_workflow_execution_completed_event_attributes.initiated_event_id
            out.append(Record(ev.event_id, "end", "", ref, at))
    return out


def step_times(recs: Sequence[Record]) -> list[tuple[str, float]]:
    """(step, seconds) summed per name, in order of first start; unfinished starts are left out."""
    starts = {r.event_id: r for r in recs if r.kind == "start"}
    totals: dict[str, float] = {}
    order: list[str] = []
    for r in sorted(starts.values(), key=lambda r: r.event_id):
        if r.name not in totals:
            totals[r.name] = 0.0
            order.append(r.name)
    seen: set[str] = set()
    for r in recs:
        if r.kind == "end" and r.ref in starts:
            start = starts[r.ref]
            totals[start.name] += r.at - start.at
            seen.add(start.name)
    return [(name, totals[name]) for name in order if name in seen]


def covered(recs: Sequence[Record], names: Iterable[str] | None = None) -> float:
    """Seconds covered by at least one finished step (of ``names``, or any): steps that ran side by side
    count once, so ``wall - covered(...)`` is the time no activity or child workflow was running."""
    wanted = set(names) if names is not None else None
    starts = {r.event_id: r for r in recs if r.kind == "start" and (wanted is None or r.name in wanted)}
    spans = sorted((starts[r.ref].at, r.at) for r in recs if r.kind == "end" and r.ref in starts)
    total = 0.0
    open_start = open_end = None
    for begin, end in spans:
        if open_end is None or begin > open_end:
            if open_start is not None and open_end is not None:
                total += open_end - open_start
            open_start, open_end = begin, end
        else:
            open_end = max(open_end, end)
    if open_start is not None and open_end is not None:
        total += open_end - open_start
    return total


def counts_by_name(recs: Sequence[Record]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in recs:
        if r.kind == "start":
            out[r.name] = out.get(r.name, 0) + 1
    return out


def span(events: Sequence[Any]) -> float:
    """Seconds from the first to the last event of a history."""
    if not events:
        return 0.0
    first: datetime = events[0].event_time.ToDatetime()
    last: datetime = events[-1].event_time.ToDatetime()
    return (last - first).total_seconds()


def attempts(events: Iterable[Any]) -> dict[str, int]:
    """The attempt each activity completed on, by activity label (a retry is not an event of its own: the
    started event written when the activity closes carries its attempt number)."""
    names: dict[int, str] = {}
    out: dict[str, int] = {}
    for ev in events:
        t = ev.event_type
        if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = ev.activity_task_scheduled_event_attributes
            names[ev.event_id] = activity_label(attrs.activity_type.name, attrs.activity_id)
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = ev.activity_task_started_event_attributes
            name = names.get(attrs.scheduled_event_id, "?")
            out[name] = max(out.get(name, 0), int(attrs.attempt))
    return out
