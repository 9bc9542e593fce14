"""Sessions step: a permanent tombstone per session, then events, sessions and the user_states row."""

from __future__ import annotations

from temporalio import activity

from activities.support import PlatformActivities, beat, heartbeat_details, translate_errors
from stores.redaction import sensitive
from workflows.contracts import StepInput, StepResult

BATCH = 50


class SessionActivities(PlatformActivities):
    @activity.defn(name="erase_sessions")
    @translate_errors
    def erase_sessions(self, inp: StepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        store = self.platform.sessions
        state = heartbeat_details({"sessions": 0, "events": 0, "batches": 0})
        with sensitive(subject.user_id):
            ids = store.session_ids(subject.app_name, subject.user_id)
            tombstoned = self.platform.ledger.mark_sessions(subject.app_name, ids, subject.subject_key, inp.request_id)
            self.platform.requests.merge_record(
                inp.request_id, erased_sessions=self.platform.ledger.session_digests_of(subject.subject_key)
            )
            sessions, events, batches = int(state["sessions"]), int(state["events"]), int(state["batches"])
            for start in range(0, len(ids), BATCH):
                counts = store.erase_sessions(subject.app_name, subject.user_id, ids[start : start + BATCH])
                sessions += counts.sessions
                events += counts.events
                batches += 1
                beat(sessions=sessions, events=events, batches=batches, remaining=max(len(ids) - start - BATCH, 0))
            user_states = store.erase_user_state(subject.app_name, subject.user_id).user_states
        return StepResult(
            "sessions",
            {"session_tombstones": tombstoned, "sessions": sessions, "events": events, "user_states": user_states},
        )
