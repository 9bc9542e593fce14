"""Artifacts step (historical activity of requests filed before plans): the ``artifacts`` adapter's erase."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.store_steps import StoreStepActivities
from workflows.contracts.erasure import Activities, StepInput, StepResult


class ArtifactActivities(StoreStepActivities):
    @activity.defn(name=Activities.ARTIFACTS)
    def erase_artifacts(self, inp: StepInput) -> StepResult:
        return self.legacy_erase(inp, "artifacts")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.erase_artifacts]
