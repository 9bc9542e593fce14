"""Keys step: crypto-shred every wrapped version of the subject's data key."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from temporalio import activity

from activities.support import PlatformActivities, translate_errors
from workflows.contracts import StepInput, StepResult


class KeyActivities(PlatformActivities):
    @activity.defn(name="shred_keys")
    @translate_errors
    def shred_keys(self, inp: StepInput) -> StepResult:
        destroyed = self.platform.keys.shred(inp.subject_key)
        now = datetime.now(UTC).isoformat()
        self.platform.requests.update_record(
            inp.request_id, lambda r: r if r.keys_shredded_at else replace(r, keys_shredded_at=now)
        )
        return StepResult("keys", {"key_versions": destroyed})
