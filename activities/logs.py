"""Logs step: rewrite only the segments the subject index names, segment by segment."""

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
        state = heartbeat_details({"segments": 0, "lines": 0})
        segments = archive.segments_of(subject.subject_key)
        self.platform.requests.update_record(
            inp.request_id, lambda r: replace(r, purged_segments=sorted(set(r.purged_segments or []) | set(segments)))
        )
        done, lines = int(state["segments"]), int(state["lines"])
        with sensitive(subject.user_id):
            for n, key in enumerate(segments):  # purged segments leave the index: a retry sees only the rest
                lines += archive.purge_segment(key, subject.app_name, subject.user_id, subject.subject_key)
                done += 1
                beat(segments=done, lines=lines, remaining=len(segments) - n - 1)
        return StepResult("logs", {"segments": done, "lines": lines})
