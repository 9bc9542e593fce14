"""How the saga calls its activities: the timeouts, and ``quick`` for the short bookkeeping ones."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import StateChange

QUICK_TIMEOUT = timedelta(seconds=15)
BATCH_TIMEOUT = timedelta(minutes=30)
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
WEBHOOK_TIMEOUT = timedelta(seconds=30)  # per attempt; retried by retry_policies.WEBHOOK (about an hour)

A = TypeVar("A")
T = TypeVar("T")


async def quick(declared: Callable[[A], T], arg: A) -> T:
    """Run a quick activity by its typed declaration (``workflows.contracts.activity_refs``) with the saga's policy."""
    return await workflow.execute_activity(
        declared, arg, start_to_close_timeout=QUICK_TIMEOUT, retry_policy=retry_policies.STEP
    )


async def record_state(request_id: str, state: str) -> None:
    """Record a state of the request (on hold, pending approval, ...) with the request store."""
    await quick(refs.set_request_state, StateChange(request_id, state, workflow.now().isoformat()))
