"""What a running saga shows: each step's progress, its status and stage, and the webhooks they send.

The status and stage are search attributes, upserted at the end of a workflow task and only when a value
changed (the values the filer set at start cost nothing; steps started side by side cost one upsert).
Console-filed requests send a signed webhook per status change; the saga waits for them before it ends,
and one that fails for good is given up, never the erasure.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import SAGA_STEPS, StateEvent, StepProgress
    from workflows.contracts.search_attributes import ERASURE_STAGE, ERASURE_STATUS
    from workflows.erasure.calls import WEBHOOK_TIMEOUT


class Board:
    def __init__(self, request_id: str, due_at: str) -> None:
        self.request_id, self.due_at = request_id, due_at
        self.subject_key = ""
        self.notify = False  # console-filed: a webhook per status change
        self.steps: dict[str, StepProgress] = {name: StepProgress(name) for name in SAGA_STEPS}
        self.status = "received"
        self.stage = "received"
        self._shown: tuple[str | None, str | None] = (None, None)  # status and stage as last upserted
        self._show_pending = False
        self._notified_status = ""
        self._notices: list[workflow.ActivityHandle[int]] = []

    def started(self) -> None:
        """The status and stage the run started with (set by the filer, or carried by a continue-as-new)."""
        shown = workflow.info().typed_search_attributes
        self._shown = (shown.get(ERASURE_STATUS), shown.get(ERASURE_STAGE))

    def use_steps(self, names: tuple[str, ...]) -> None:
        """The progress steps are ``names`` (those already under way kept)."""
        before = self.steps
        self.steps = {name: before.get(name) or StepProgress(name) for name in names}

    def set(self, status: str, stage: str | None = None) -> None:
        self.status = status
        if stage is not None:
            self.stage = stage
        if not self._show_pending:  # once, at the end of this workflow task, and only if a value changed
            self._show_pending = True
            asyncio.get_running_loop().call_soon(self.show)
        if self.notify and status != self._notified_status:
            self._notified_status = status
            event = StateEvent(
                self.request_id, self.subject_key, status, self.stage, workflow.now().isoformat(), self.due_at
            )
            self._notices.append(
                workflow.start_activity(
                    refs.send_webhook,
                    event,
                    start_to_close_timeout=WEBHOOK_TIMEOUT,
                    retry_policy=retry_policies.WEBHOOK,
                )
            )

    def show(self) -> None:
        """Upsert the status and stage that changed since they were last shown."""
        self._show_pending = False
        changed = []
        if self.status != self._shown[0]:
            changed.append(ERASURE_STATUS.value_set(self.status))
        if self.stage != self._shown[1]:
            changed.append(ERASURE_STAGE.value_set(self.stage))
        if changed:
            workflow.upsert_search_attributes(changed)
            self._shown = (self.status, self.stage)

    async def drain_notices(self) -> None:
        """Wait for the webhooks started so far; one that failed for good is given up, never the erasure."""
        if self._notices:
            await asyncio.gather(*self._notices, return_exceptions=True)
            self._notices.clear()

    def mark(self, name: str, state: str, counts: dict[str, int] | None = None) -> None:
        step = self.steps[name]
        self.steps[name] = replace(
            step,
            state=state,
            counts=counts if counts is not None else step.counts,
            attempts=step.attempts + (1 if state == "running" else 0),
        )

    def done(self, name: str) -> bool:
        return self.steps[name].state in ("done", "skipped")

    def next_stage(self) -> str:
        """The first step not done yet (where a continued run resumes)."""
        return next((name for name in self.steps if not self.done(name)), "fence")
