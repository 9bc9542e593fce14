"""The Temporal Schedules of the late-writer sweep, the retention-expiry sweep, the wrapping-key epoch job, the
physical clean-up job and the request reconciler: install (idempotent), list, pause, resume, trigger."""

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
from workflows.contracts.key_epochs import KEY_EPOCH_RUN_ID, KEY_EPOCH_WORKFLOW, KeyEpochInput
from workflows.contracts.physical import PHYSICAL_RUN_ID, PHYSICAL_WORKFLOW, PhysicalJobInput
from workflows.contracts.reconcile import RECONCILE_RUN_ID, RECONCILE_WORKFLOW, ReconcileInput

SCHEDULE_ID = "late-writer-sweep"
EXPIRY_SCHEDULE_ID = "retention-expiry-sweep"
KEY_EPOCH_SCHEDULE_ID = "key-epoch-rotation"
PHYSICAL_SCHEDULE_ID = "physical-cleanup"
RECONCILE_SCHEDULE_ID = "request-reconciler"
#: every schedule ``install`` installs
SCHEDULE_IDS = (SCHEDULE_ID, EXPIRY_SCHEDULE_ID, KEY_EPOCH_SCHEDULE_ID, PHYSICAL_SCHEDULE_ID, RECONCILE_SCHEDULE_ID)
#: the schedules by the name ``erasure schedule --sweep`` takes
BY_NAME = {
    "late-writer": SCHEDULE_ID,
    "expiry": EXPIRY_SCHEDULE_ID,
    "key-epochs": KEY_EPOCH_SCHEDULE_ID,
    "physical": PHYSICAL_SCHEDULE_ID,
    "reconcile": RECONCILE_SCHEDULE_ID,
}
#: how often the key-epoch job looks (it rotates only when the current epoch is ERASURE_KEY_EPOCH_DAYS old):
#: one of the two terms besides the period and the retention in the shredding bound (``EpochPolicy``)
KEY_EPOCH_CHECK = timedelta(days=1)
#: how often the reconciler looks for requests whose workflow is closed or missing (a filing checks its own
#: subject at once; this bounds how long any other stranded request shows as open)
RECONCILE_EVERY = timedelta(minutes=10)


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


def key_epoch_input(settings: Settings) -> KeyEpochInput:
    return KeyEpochInput(
        epoch_days=settings.key_epoch_days,
        retention_days=settings.backup_retention_days,
        check_hours=KEY_EPOCH_CHECK.total_seconds() / 3600,
        rewrite=settings.key_epoch_rewrite,
    )


def key_epoch_schedule(settings: Settings) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            KEY_EPOCH_WORKFLOW, key_epoch_input(settings), id=KEY_EPOCH_RUN_ID, task_queue=settings.task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=KEY_EPOCH_CHECK)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="wrapping-key epochs: rotate, re-wrap every data key, delete retired epochs' keys"),
    )


def physical_input(settings: Settings) -> PhysicalJobInput:
    """The job's input: the key-epoch policy (the attestation states its bound) and the keys table's rewrite."""
    epochs = key_epoch_input(settings)
    return PhysicalJobInput(
        epoch_days=epochs.epoch_days,
        retention_days=epochs.retention_days,
        check_hours=epochs.check_hours,
        rewrite=epochs.rewrite,
    )


def physical_schedule(settings: Settings) -> Schedule:
    """The platform's physical clean-up (issue 30): every finished request's vacuum and compaction in one run,
    one run at a time, on its own task queue; a request past its window fails the run."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            PHYSICAL_WORKFLOW, physical_input(settings), id=PHYSICAL_RUN_ID, task_queue=settings.physical_task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=settings.physical_interval)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="physical clean-up: vacuum and compaction for finished requests, attested"),
    )


def reconcile_schedule(settings: Settings) -> Schedule:
    """The request reconciler (issue 40 item 4): fails open requests whose workflow is closed or missing."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            RECONCILE_WORKFLOW, ReconcileInput(), id=RECONCILE_RUN_ID, task_queue=settings.task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=RECONCILE_EVERY)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note="request reconciler: fail requests whose workflow is closed or missing"),
    )


async def install(client: Client, settings: Settings) -> str:
    """Install (or update) every scheduled job's schedule; ``created`` when any was new, else ``updated``."""
    outcomes = [
        await _install(client, SCHEDULE_ID, sweep_schedule(settings)),
        await _install(client, EXPIRY_SCHEDULE_ID, expiry_schedule(settings)),
        await _install(client, KEY_EPOCH_SCHEDULE_ID, key_epoch_schedule(settings)),
        await _install(client, PHYSICAL_SCHEDULE_ID, physical_schedule(settings)),
        await _install(client, RECONCILE_SCHEDULE_ID, reconcile_schedule(settings)),
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
