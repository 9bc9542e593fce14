"""The Temporal Schedule of the late-writer sweep: install (idempotent), list, pause, resume, trigger."""

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
from workflows.contracts import SWEEP_WORKFLOW, SweepInput

SCHEDULE_ID = "late-writer-sweep"


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


async def install(client: Client, settings: Settings) -> str:
    schedule = sweep_schedule(settings)
    try:
        await client.create_schedule(SCHEDULE_ID, schedule)
        return "created"
    except ScheduleAlreadyRunningError:

        def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
            schedule.state = current.description.schedule.state  # keep paused/unpaused as the operator left it
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(SCHEDULE_ID).update(update)
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


async def pause(client: Client, note: str = "paused by operator") -> None:
    await client.get_schedule_handle(SCHEDULE_ID).pause(note=note)


async def resume(client: Client, note: str = "resumed by operator") -> None:
    await client.get_schedule_handle(SCHEDULE_ID).unpause(note=note)


async def trigger(client: Client) -> None:
    await client.get_schedule_handle(SCHEDULE_ID).trigger(overlap=ScheduleOverlapPolicy.SKIP)
