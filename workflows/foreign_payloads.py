"""The workflow interceptor that keeps foreign payloads from stranding a workflow (issue 40 item 4).

Signals and updates reach a workflow from anyone who reaches Temporal's frontend. One whose argument the
codec refused (``workflows.contracts.foreign``), or whose arguments do not fit its handler (a payload the
handler cannot take would fail the workflow task on every retry), is:

- a signal: dropped, and audited by name in the workflow's memo (``dropped_signals``, the names only, and
  ``dropped_signal_count``) and a warning log line; never its payload;
- an update: refused by its validator step (a rejected update writes nothing to the history).

Only handler names the workflow defines reach here (a signal with an unknown name is buffered by the SDK),
so the names in the memo are ours, never text a sender chose. Deterministic: the same history drops the same
signals on replay.
"""

from __future__ import annotations

import inspect
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

with workflow.unsafe.imports_passed_through():
    from workflows.contracts.foreign import REFUSED_MESSAGE, refused

MEMO_NAMES = "dropped_signals"
MEMO_COUNT = "dropped_signal_count"
FOREIGN_PAYLOAD = "ForeignPayload"


def _fits(handler: Any, args: list[Any]) -> bool:
    if handler is None:
        return True
    try:
        inspect.signature(handler).bind(*args)
    except TypeError:
        return False
    return True


class _Inbound(WorkflowInboundInterceptor):
    def __init__(self, next: WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self._dropped: list[str] = []

    async def handle_signal(self, input: HandleSignalInput) -> None:
        args = list(input.args)
        if refused(args) or not _fits(workflow.get_signal_handler(input.signal), args):
            self._dropped.append(input.signal)
            workflow.logger.warning("dropped a foreign signal", extra={"signal": input.signal})
            workflow.upsert_memo({MEMO_NAMES: sorted(set(self._dropped)), MEMO_COUNT: len(self._dropped)})
            return
        await super().handle_signal(input)

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        if refused(input.args):
            raise ValueError(REFUSED_MESSAGE)
        super().handle_update_validator(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        if refused(input.args):  # an update without a validator: refused here, as a failed update
            raise ApplicationError(REFUSED_MESSAGE, type=FOREIGN_PAYLOAD, non_retryable=True)
        return await super().handle_update_handler(input)


class ForeignPayloads(Interceptor):
    """Installs ``_Inbound`` on every workflow of the worker."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _Inbound
