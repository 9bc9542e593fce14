"""The crash drill's pause, a worker interceptor of its own: installed only when ``ERASURE_CHAOS_PAUSE_MS``
is set (``workers.worker.worker_interceptors``), so no production activity or heartbeat carries it.

Each synchronous activity pauses ``pause`` seconds at its start and after each of its heartbeats, so a kill
(``tests/crash_drill.py``) lands between steps or inside a batched step. The pause runs in the activity's own
thread: the SDK sends a synchronous activity's heartbeat through the event loop (its outbound interceptors
run there), so the pause is put on the activity's context for its thread instead of on the outbound
interceptor, where a sleep would stall every activity of the worker.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor


def pausing(fn: Callable[..., Any], pause: float) -> Callable[..., Any]:
    """``fn`` pausing at its start and after each heartbeat it sends (run in the activity's thread)."""

    @functools.wraps(fn)
    def drilled(*args: Any, **kwargs: Any) -> Any:
        context = activity._Context.current()  # the SDK's own hook for the heartbeat callable
        sent = context.heartbeat
        assert sent is not None

        def heartbeat_then_pause(*details: Any) -> None:
            sent(*details)
            time.sleep(pause)

        context.heartbeat = heartbeat_then_pause
        time.sleep(pause)
        return fn(*args, **kwargs)

    return drilled


class CrashDrill(Interceptor):
    """Seconds each activity pauses at its start and after every heartbeat (crash drills only)."""

    def __init__(self, pause: float) -> None:
        if pause <= 0:
            raise ValueError("a crash drill needs a pause > 0 (without one, do not install it)")
        self.pause = pause

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self.pause)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, pause: float) -> None:
        super().__init__(next)
        self._pause = pause

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if not inspect.iscoroutinefunction(input.fn):
            input = dataclasses.replace(input, fn=pausing(input.fn, self._pause))
        return await self.next.execute_activity(input)
