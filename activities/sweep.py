"""Second sweep (historical activity of requests filed before plans): every registered adapter again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class SweepActivities(StoreStepActivities):
    @activity.defn(name=Activities.SWEEP)
    def second_sweep(self, inp: StepInput) -> StepResult:
        return self.second_sweep_of(inp, self.adapters.names)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.second_sweep]
