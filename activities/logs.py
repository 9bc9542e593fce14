"""Logs step (historical activity of requests filed before plans): the ``logs`` adapter's erase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class LogActivities(StoreStepActivities):
    @activity.defn(name=Activities.LOGS)
    def purge_logs(self, inp: StepInput) -> StepResult:
        return self.legacy_erase(inp, "logs")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.purge_logs]
