"""Memory step: the user's rows with their embeddings, and every row derived from them."""

from __future__ import annotations

from temporalio import activity

from activities.support import PlatformActivities, beat, translate_errors
from stores.identity import session_ref
from workflows.contracts import StepInput, StepResult


class MemoryActivities(PlatformActivities):
    @activity.defn(name="forget_memory")
    @translate_errors
    def forget_memory(self, inp: StepInput) -> StepResult:
        refs = [session_ref(inp.subject_key, s) for s in self.platform.ledger.sessions_of(inp.subject_key)]
        beat(phase="provenance")
        result = self.platform.memory.erase_user(inp.subject_key, refs)
        beat(phase="deleted", rows=result.rows, derived=result.derived)
        record = self.platform.requests.get(inp.request_id).record
        erased = sorted(set(record.get("erased_memory_ids", [])) | set(result.derived_ids))
        self.platform.requests.merge_record(
            inp.request_id,
            {
                "derived_removed": sorted(set(record.get("derived_removed", [])) | set(result.derived_ids)),
                "erased_memory_ids": erased,
            },
        )
        return StepResult("memory", {"rows": result.rows, "derived_rows": result.derived})
