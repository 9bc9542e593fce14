"""Sessions step (historical activity of requests filed before plans): the ``sessions`` adapter's erase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class SessionActivities(StoreStepActivities):
    @activity.defn(name=Activities.SESSIONS)
    def erase_sessions(self, inp: StepInput) -> StepResult:
        return self.legacy_erase(inp, "sessions")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.erase_sessions]
