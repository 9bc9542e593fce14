"""The Temporal Schedules of the late-writer sweep and the retention-expiry sweep: install (idempotent), list,
pause, resume, trigger."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from workers.settings import Settings
from workflows.contracts.erasure import SWEEP_WORKFLOW, SweepInput
from workflows.contracts.expiry import EXPIRY_RUN_ID, EXPIRY_WORKFLOW, ExpiryInput

SCHEDULE_ID = "late-writer-sweep"
EXPIRY_SCHEDULE_ID = "retention-expiry-sweep"


def sweep_schedule(settings: Settings) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            SWEEP_WORKFLOW,
            SweepInput(lookback_hours=settings.sweep_lookback),
            id="late-writer-sweep-run",
            task_queue=settings.task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=settings.sweep_interval))]),
        # a sweep still running when the next is due: skip, never stack
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="late-writer sweep over recently erased subjects"),
    )


def expiry_schedule(settings: Settings) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            EXPIRY_WORKFLOW,
            ExpiryInput(),
            id=EXPIRY_RUN_ID,
            task_queue=settings.task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=settings.expiry_interval))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="retention expiry: forget memory rows whose retention ended"),
    )


async def install(client: Client, settings: Settings) -> str:
    """Install (or update) both sweeps' schedules; ``created`` when either was new, else ``updated``."""
    outcomes = [
        await _install(client, SCHEDULE_ID, sweep_schedule(settings)),
        await _install(client, EXPIRY_SCHEDULE_ID, expiry_schedule(settings)),
    ]
    return "created" if "created" in outcomes else "updated"


async def _install(client: Client, schedule_id: str, schedule: Schedule) -> str:
    try:
        await client.create_schedule(schedule_id, schedule)
        return "created"
    except ScheduleAlreadyRunningError:

        def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule.state = current.description.schedule.state  # keep paused/unpaused as the operator left it
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(update)
        return "updated"


@dataclass(frozen=True)
class ScheduleView:
    schedule_id: str
    paused: bool
    every: str
    next_runs: list[str]
    recent_runs: int
    note: str


async def list_schedules(client: Client) -> list[ScheduleView]:
    views = []
    async for item in await client.list_schedules():
        desc = await client.get_schedule_handle(item.id).describe()
        spec = desc.schedule.spec
        every = ", ".join(str(i.every) for i in spec.intervals) or "calendar"
        views.append(
            ScheduleView(
                schedule_id=item.id,
                paused=desc.schedule.state.paused,
                every=every,
                next_runs=[t.isoformat() for t in desc.info.next_action_times[:3]],
                recent_runs=len(desc.info.recent_actions),
                note=desc.schedule.state.note or "",
            )
        )
    return views


async def pause(client: Client, note: str = "paused by operator", schedule_id: str = SCHEDULE_ID) -> None:
    await client.get_schedule_handle(schedule_id).pause(note=note)


async def resume(client: Client, note: str = "resumed by operator", schedule_id: str = SCHEDULE_ID) -> None:
    await client.get_schedule_handle(schedule_id).unpause(note=note)


async def trigger(client: Client, schedule_id: str = SCHEDULE_ID) -> None:
    await client.get_schedule_handle(schedule_id).trigger(overlap=ScheduleOverlapPolicy.SKIP)
