"""Fence activities: the user-level tombstone that refuses new writes while the erasure runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.support import PlatformActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class FenceActivities(PlatformActivities):
    @activity.defn(name=Activities.FENCE_UNLESS_HELD)
    def fence_user_unless_held(self, inp: StepInput) -> StepResult:
        """The fence, unless the hold store holds the subject right now (then nothing is done: ``held``)."""
        if self.platform.requests.active_hold(inp.subject_key) is not None:
            return StepResult("fence", held=True)
        created = self.platform.ledger.fence_user(inp.subject_key, inp.app_name, inp.request_id)
        return StepResult("fence", {"user_tombstones": 1 if created else 0})

    @activity.defn(name=Activities.LIFT_FENCE)
    def lift_fence(self, inp: StepInput) -> StepResult:
        """Lift the user fence; session tombstones stay so old sessions can never be re-ingested."""
        lifted = self.platform.ledger.lift_user(inp.subject_key)
        return StepResult("lift_fence", {"user_tombstones_lifted": 1 if lifted else 0})

    def activities(self) -> list[Callable[..., Any]]:
        return [self.fence_user_unless_held, self.lift_fence]
