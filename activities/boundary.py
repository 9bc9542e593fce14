"""The one boundary every activity of the worker passes: ``StepBoundary``, a worker interceptor.

It runs each activity inside ``activities.support.translate_errors``: the start and end log lines with the
step's label, the step-duration metric, the crash-drill pause (``StepBoundary(chaos_pause=...)``), the raw ids an
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


def at_the_boundary(fn: Callable[P, R], chaos_pause: float = 0.0) -> Callable[P, R]:
    """A synchronous activity as the worker runs it (what ``StepBoundary`` wraps it in): for running one
    outside a worker, in the SDK's ``ActivityEnvironment``."""
    return translate_errors(fn, chaos_pause)


class StepBoundary(Interceptor):
    """``chaos_pause`` (crash drills only; the worker sets it from ``ERASURE_CHAOS_PAUSE_MS``): seconds each
    activity pauses at its start and after every heartbeat, so a kill lands inside a batched step or between
    steps. Zero in normal operation."""

    def __init__(self, chaos_pause: float = 0.0) -> None:
        self.chaos_pause = chaos_pause

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self.chaos_pause)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, chaos_pause: float) -> None:
        super().__init__(next)
        self._chaos_pause = chaos_pause

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if not inspect.iscoroutinefunction(input.fn):
            input = dataclasses.replace(input, fn=at_the_boundary(input.fn, self._chaos_pause))
        return await self.next.execute_activity(input)
