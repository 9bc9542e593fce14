"""Memory step: the user's rows with their embeddings, and every row derived from them."""

from __future__ import annotations

from dataclasses import replace

from temporalio import activity

from activities.support import PlatformActivities, beat, translate_errors
from stores.identity import session_ref
from workflows.contracts import StepInput, StepResult


class MemoryActivities(PlatformActivities):
    @activity.defn(name="forget_memory")
    @translate_errors
    def forget_memory(self, inp: StepInput) -> StepResult:
        """Every erased id (the user's own and derived) is recorded in ``erased_memories`` by the eraser, in
        the delete's transaction; the record gets the derived ids for the receipt and marks the step done."""
        refs = [session_ref(inp.subject_key, s) for s in self.platform.ledger.sessions_of(inp.subject_key)]
        beat(phase="provenance")
        result = self.platform.memory.erase_user(inp.subject_key, refs, request_id=inp.request_id)
        beat(phase="deleted", rows=result.rows, derived=result.derived)
        self.platform.requests.update_record(
            inp.request_id,
            lambda r: replace(r, derived_removed=sorted(set(r.derived_removed or []) | set(result.derived_ids))),
        )
        return StepResult("memory", {"rows": result.rows, "derived_rows": result.derived})
