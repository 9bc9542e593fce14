"""Temporal actions per erasure, counted from the workflow histories (what Temporal Cloud bills).

Temporal Cloud bills *actions*. The ones an erasure can cause, and the history events that show them:

==============================  =================================================================
action                          history event (per event unless said)
==============================  =================================================================
workflow started                the execution's own start (client start, continue-as-new, child start)
activity started or retried     ``ACTIVITY_TASK_STARTED``'s ``attempt`` (the server writes one started
                                event per activity, at its close, with the attempt it closed on)
timer started                   ``TIMER_STARTED`` (``workflow.sleep``, ``wait_condition`` timeouts)
signal                          ``WORKFLOW_EXECUTION_SIGNALED`` (received) and
                                ``SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED`` (sent)
search attributes upserted      ``UPSERT_WORKFLOW_SEARCH_ATTRIBUTES``
workflow properties updated     ``WORKFLOW_PROPERTIES_MODIFIED`` (memo upserts)
update accepted                 ``WORKFLOW_EXECUTION_UPDATE_ACCEPTED``
local activity / side effect    ``MARKER_RECORDED`` (one per marker: an estimate, Cloud batches them)
==============================  =================================================================

Child workflows are counted in their own histories (their start is their "workflow started"), reached
through ``CHILD_WORKFLOW_EXECUTION_STARTED`` events; a continued-as-new run through its next run id.
Activity heartbeats are billed too but leave no history event: they are counted apart (``heartbeats``,
from the activities' durations and the SDK's throttle, see ``heartbeat_estimate``) and reported beside
the history figure, never mixed into it. Queries are actions when someone asks one (the CLI's progress
display does): not part of an erasure's own cost.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

_PER_EVENT = {
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "signal",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "search_attributes",
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "properties",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker",
}
#: an attempt's end, and the attribute naming its scheduled event
_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


@dataclass
class ActionCount:
    """Billable actions by kind, for one execution and everything it started."""

    by_kind: Counter[str] = field(default_factory=Counter)
    executions: int = 0  # workflow executions walked (runs and children)
    heartbeats: int = 0  # estimated, not in any history (``heartbeat_estimate``); not in ``total``

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def as_dict(self) -> dict[str, int]:
        return {"total": self.total, **dict(sorted(self.by_kind.items())), "heartbeats_estimated": self.heartbeats}


@dataclass
class RunActions:
    """One run's history, reduced: actions by kind, children started, the next run, heartbeats estimated."""

    kinds: Counter[str] = field(default_factory=Counter)
    children: list[str] = field(default_factory=list)
    next_run: str | None = None
    heartbeats: int = 0


def count_events(events: Iterable[Any]) -> RunActions:
    out = RunActions()
    timeouts: dict[int, float] = {}  # scheduled event id -> heartbeat timeout (s), for those that set one
    started: dict[int, float] = {}  # scheduled event id -> when its (last) attempt started
    durations: dict[float, list[float]] = {}
    for ev in events:
        t = ev.event_type
        at = ev.event_time.ToMicroseconds() / 1e6
        if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            timeout = ev.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta().total_seconds()
            if timeout > 0:
                timeouts[ev.event_id] = timeout
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = ev.activity_task_started_event_attributes
            started[attrs.scheduled_event_id] = at
            out.kinds["activity"] += max(attrs.attempt, 1)  # one event per activity, written at its close
        elif t in _CLOSED:
            ref = getattr(ev, _CLOSED[t]).scheduled_event_id
            if ref in timeouts and ref in started:
                durations.setdefault(timeouts[ref], []).append(at - started[ref])
        if t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            out.kinds["workflow_started"] += 1
        elif t in _PER_EVENT:
            out.kinds[_PER_EVENT[t]] += 1
        elif t == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            out.children.append(ev.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id)
        elif t == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            out.next_run = ev.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    out.heartbeats = sum(heartbeat_estimate(ds, timeout) for timeout, ds in durations.items())
    return out


async def count_actions(client: Client, workflow_id: str, run_id: str | None = None) -> ActionCount:
    """Every action of ``workflow_id`` (from ``run_id``, or its first run the server keeps), its later runs
    and its children, recursively."""
    out = ActionCount()
    pending: list[tuple[str, str | None]] = [(workflow_id, run_id)]
    while pending:
        wid, rid = pending.pop()
        history = await client.get_workflow_handle(wid, run_id=rid).fetch_history()
        run = count_events(history.events)
        out.by_kind.update(run.kinds)
        out.heartbeats += run.heartbeats
        out.executions += 1
        pending.extend((child, None) for child in run.children)
        if run.next_run:
            pending.append((wid, run.next_run))
    return out


def heartbeat_estimate(durations: Iterable[float], heartbeat_timeout: float) -> int:
    """Heartbeats an activity sends to the server: the SDK throttles them to one per 80% of the heartbeat
    timeout (the first goes at once), so an attempt of ``d`` seconds that heartbeats often sends about
    ``1 + d / (0.8 * timeout)``; an attempt shorter than the throttle interval sends one."""
    interval = 0.8 * heartbeat_timeout
    return sum(1 + math.floor(d / interval) for d in durations if d >= 0)
