"""Keys step (historical activity of requests filed before plans): the ``keys`` adapter's erase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class KeyActivities(StoreStepActivities):
    @activity.defn(name=Activities.KEYS)
    def shred_keys(self, inp: StepInput) -> StepResult:
        return self.legacy_erase(inp, "keys")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.shred_keys]
