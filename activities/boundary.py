"""The one boundary every activity of the worker passes: ``StepBoundary``, a worker interceptor.

It runs each activity inside ``activities.support.translate_errors``: the start and end log lines with the
step's label, the step-duration metric, the raw ids an
activity registers for masking (``keep_sensitive``), and the translation of every error into an
``ApplicationError`` that holds no raw id and no cause chain (known errors no retry can fix become
non-retryable). Before this interceptor each activity was decorated by hand (31 of 33 were; the two
notification activities were not, so a database error while reading a subject's contact reached Temporal
history as the driver wrote it). A new activity is covered by being registered, not by remembering a
decorator.

The wrapping happens on the activity function itself (``ExecuteActivityInput.fn``), so for the worker's
synchronous activities it runs in the activity's own thread, where ``keep_sensitive`` keeps its per-thread
registry. Async activities (the worker has none) pass through unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities.support import translate_errors

P = ParamSpec("P")
R = TypeVar("R")


def at_the_boundary(fn: Callable[P, R]) -> Callable[P, R]:
    """A synchronous activity as the worker runs it (what ``StepBoundary`` wraps it in): for running one
    outside a worker, in the SDK's ``ActivityEnvironment``."""
    return translate_errors(fn)


class StepBoundary(Interceptor):
    """Every synchronous activity inside ``translate_errors`` (the crash drill's pause is an interceptor of
    its own, ``activities.crash_drill``, installed only for drills)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if not inspect.iscoroutinefunction(input.fn):
            input = dataclasses.replace(input, fn=at_the_boundary(input.fn))
        return await self.next.execute_activity(input)
