"""Keys step: crypto-shred every wrapped version of the subject's data key."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import activity

from activities.support import PlatformActivities, translate_errors
from workflows.contracts import StepInput, StepResult


class KeyActivities(PlatformActivities):
    @activity.defn(name="shred_keys")
    @translate_errors
    def shred_keys(self, inp: StepInput) -> StepResult:
        destroyed = self.platform.keys.shred(inp.subject_key)
        record = self.platform.requests.get(inp.request_id).record
        if "keys_shredded_at" not in record:
            self.platform.requests.merge_record(inp.request_id, {"keys_shredded_at": datetime.now(UTC).isoformat()})
        return StepResult("keys", {"key_versions": destroyed})
