"""The hold gate: a legal hold wins, whatever happened to its signal.

Each destructive step's own activity reads the hold store right before its work and does nothing while a
hold exists (its result says ``held``). The step is then pending again and waits here for the release:
the gate re-reads the hold store (``hold_active``) with a back-off, 10 minutes growing to 6 hours, and a
``hold_changed`` signal wakes it at once. Steps that find the hold while a wait is under way share that
wait. After ``HOLD_RECHECKS_PER_RUN`` re-checks in one run (or when the server suggests it, or once another
Worker Deployment version is current) the saga continues as new, carrying its progress, so a hold of any
length keeps each run's history small; a run continued while on hold waits for the release first.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts.erasure import StepInput
    from workflows.erasure.board import Board
    from workflows.erasure.calls import quick, record_state

HOLD_RECHECK = timedelta(minutes=10)
HOLD_RECHECK_MAX = timedelta(hours=6)
HOLD_RECHECKS_PER_RUN = 50  # then continue as new: each re-check adds about a dozen history events


def hold_recheck_interval(rechecks: int) -> timedelta:
    """How long to wait before re-reading the hold store, after ``rechecks`` re-checks in this hold."""
    return min(HOLD_RECHECK * (1 << min(rechecks, 16)), HOLD_RECHECK_MAX)


class PauseForContinueAsNew(Exception):
    """The saga has waited on a hold long enough in this run: continue as new (never escapes ``run``)."""


class HoldGate:
    def __init__(self, board: Board) -> None:
        self._board = board
        self.signals = 0  # ``hold_changed`` signals received
        self.on_hold = False
        self.rechecks = 0  # re-checks in the current hold, across runs
        self._rechecks_this_run = 0
        #: a step failed (the failure decides), or this run is about to continue as new: stop waiting
        self.stop_waiting = False
        self.releases = 0  # releases noticed in this run
        self._wait: asyncio.Task[None] | None = None  # the wait for a release the held steps share

    async def read(self, step: StepInput) -> None:
        """Read the hold store now and wait while a hold exists.

        Raises ``PauseForContinueAsNew`` after ``HOLD_RECHECKS_PER_RUN`` re-checks in this run (or when the
        server suggests it), and at once when a step failed or another wait already decided to pause.
        """
        while True:
            if self.stop_waiting:
                raise PauseForContinueAsNew()
            seen = self.signals
            status = await quick(refs.hold_active, step)
            if not status.on_hold and self.on_hold:
                self.rechecks = 0
            await self._note(step, status.on_hold)
            if not status.on_hold:
                return
            await self._back_off(seen)

    async def until_released(self, step: StepInput, seen: int) -> None:
        """A step found a hold: wait until a read of the hold store finds none. ``seen``: the hold signals
        counted before the step read the store (a signal since wakes the wait at once)."""
        if self._wait is None or self._wait.done():
            self._wait = asyncio.create_task(self._wait_for_release(step, seen))
        await self._wait

    async def _wait_for_release(self, step: StepInput, seen: int) -> None:
        await self._note(step, True)
        if self.stop_waiting:
            raise PauseForContinueAsNew()
        await self._back_off(seen)
        await self.read(step)  # re-read with the back-off until released
        self.releases += 1

    async def _note(self, step: StepInput, on_hold: bool) -> None:
        """A change of the hold state, shown in the search attributes and recorded with the request."""
        if on_hold == self.on_hold:
            return
        self.on_hold = on_hold
        state = "on_hold" if on_hold else "running"
        self._board.set(state)
        await record_state(step.request_id, state)

    async def _back_off(self, seen: int) -> None:
        """Wait before the next read of the hold store, or pause this run (see ``read``)."""
        info = workflow.info()
        # a new Worker Deployment version is current: move there now (a run stays pinned to its version)
        if (
            self._rechecks_this_run >= HOLD_RECHECKS_PER_RUN
            or info.is_continue_as_new_suggested()
            or info.is_target_worker_deployment_version_changed()
        ):
            self.stop_waiting = True
            raise PauseForContinueAsNew()
        interval = hold_recheck_interval(self.rechecks)
        self.rechecks += 1
        self._rechecks_this_run += 1
        with contextlib.suppress(TimeoutError):  # until a hold signal arrives, a step fails or pauses, or it is due
            await workflow.wait_condition(lambda: self.signals > seen or self.stop_waiting, timeout=interval)
