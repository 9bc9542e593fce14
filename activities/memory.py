"""Memory step (historical activity of requests filed before plans): the ``memory`` adapter's erase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class MemoryActivities(StoreStepActivities):
    @activity.defn(name=Activities.MEMORY)
    def forget_memory(self, inp: StepInput) -> StepResult:
        return self.legacy_erase(inp, "memory")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.forget_memory]
