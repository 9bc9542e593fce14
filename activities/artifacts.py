"""Artifacts step: every object version and delete marker under the user's prefix, in one pass.

The key layout puts every session scope and the ``user:`` scope of a user under one prefix named by the
subject key (``stores.artifacts``), so one listing pass reaches them all, including artifacts of sessions
that no longer exist (stranded). Deletes go 1,000 keys per ``DeleteObjects`` request (fewer when
``ERASURE_S3_DELETE_BATCH`` says so), with a heartbeat per batch; a retry lists again and finds only what is
left, so resuming is natural and the heartbeat details carry the count so far.
"""

from __future__ import annotations

from temporalio import activity

from activities.support import PlatformActivities, beat, heartbeat_details, translate_errors
from workflows.contracts import StepInput, StepResult


class ArtifactActivities(PlatformActivities):
    @activity.defn(name="erase_artifacts")
    @translate_errors
    def erase_artifacts(self, inp: StepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        eraser = self.platform.artifacts
        state = heartbeat_details({"removed": 0, "batches": 0})
        resumed = int(state["batches"] > 0)
        base, batches = int(state["removed"]), int(state["batches"])

        def progress(n: int) -> None:
            nonlocal batches
            batches += 1
            beat(removed=base + n, batches=batches)

        removed = eraser.erase_everything_of(subject.app_name, subject.subject_key, on_batch=progress)
        return StepResult(
            "artifacts",
            {
                "objects": base + removed,  # object versions and delete markers, every scope
                "delete_requests": batches,
                "resumed_from_heartbeat": resumed,
            },
        )
