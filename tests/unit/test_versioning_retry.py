"""A routing change the server cancelled ("operation was canceled", seen under load in
tests/integration/test_worker_versioning.py) is asked again until it completes or the wait ends; another
error is raised at once."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.service import RPCError, RPCStatusCode

from workers.versioning import _until_known


def _calls(*outcomes: RPCError | str) -> tuple[list[int], object]:
    made: list[int] = []

    async def call() -> str:
        made.append(1)
        outcome = outcomes[min(len(made), len(outcomes)) - 1]
        if isinstance(outcome, RPCError):
            raise outcome
        return outcome

    return made, call


def test_a_cancelled_change_is_asked_again() -> None:
    cancelled = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    made, call = _calls(cancelled, "done")
    assert asyncio.run(_until_known(call, "d", "B", wait_seconds=5)) == "done"  # type: ignore[arg-type]
    assert len(made) == 2


def test_a_refusal_is_raised_at_once() -> None:
    refused = RPCError("permission denied", RPCStatusCode.PERMISSION_DENIED, b"")
    made, call = _calls(refused, "done")
    with pytest.raises(RPCError):
        asyncio.run(_until_known(call, "d", "B", wait_seconds=5))  # type: ignore[arg-type]
    assert len(made) == 1


def test_a_change_cancelled_until_the_wait_ends_raises_the_servers_error() -> None:
    cancelled = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    _made, call = _calls(cancelled)
    with pytest.raises(RPCError, match="canceled"):
        asyncio.run(_until_known(call, "d", "B", wait_seconds=0.6))  # type: ignore[arg-type]
