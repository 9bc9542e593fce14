"""Logs step: rewrite only the segments the subject index names, segment by segment.

Every line naming the subject goes (by its ``user_id`` or its recorded mention keys); every other line stays
byte for byte; others' malformed lines are counted (``malformed_lines``) and never block the step.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import activity

from activities.support import PlatformActivities, beat, heartbeat_details, translate_errors
from stores.redaction import sensitive
from workflows.contracts import StepInput, StepResult


class LogActivities(PlatformActivities):
    @activity.defn(name="purge_logs")
    @translate_errors
    def purge_logs(self, inp: StepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        archive = self.platform.logs
        state = heartbeat_details({"segments": 0, "lines": 0, "malformed_lines": 0})
        segments = archive.segments_of(subject.subject_key)
        self.platform.requests.update_record(
            inp.request_id, lambda r: replace(r, purged_segments=sorted(set(r.purged_segments or []) | set(segments)))
        )
        counts = {k: int(state[k]) for k in ("segments", "lines", "malformed_lines")}
        with sensitive(subject.user_id):
            for n, key in enumerate(segments):  # purged segments leave the index: a retry sees only the rest
                purged = archive.purge_subject(key, subject.app_name, subject.subject_key)
                counts["segments"] += 1
                counts["lines"] += purged.removed
                counts["malformed_lines"] += purged.malformed  # others' bad lines: kept, reported, not a failure
                beat(**counts, remaining=len(segments) - n - 1)
        return StepResult("logs", counts)
