"""Artifacts step: every version and delete marker, per session, then the user scope, then strays."""

from __future__ import annotations

from temporalio import activity

from activities.support import PlatformActivities, beat, heartbeat_details, translate_errors
from stores.redaction import sensitive
from workflows.contracts import StepInput, StepResult


class ArtifactActivities(PlatformActivities):
    @activity.defn(name="erase_artifacts")
    @translate_errors
    def erase_artifacts(self, inp: StepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        eraser = self.platform.artifacts
        with sensitive(subject.user_id):
            sessions = self.platform.sessions.session_ids(subject.app_name, subject.user_id)
        state = heartbeat_details({"sessions_done": 0, "removed": 0, "resumed": 0})
        if state["sessions_done"]:
            state["resumed"] = 1
        done, removed = int(state["sessions_done"]), int(state["removed"])
        for index, session_id in enumerate(sessions):
            if index < done:
                continue  # a previous attempt finished these (and erasing again would be a no-op)

            def progress(n: int, index: int = index, base: int = removed) -> None:
                beat(sessions_done=index, removed=base + n, total=len(sessions))

            removed += eraser.erase_session(subject.app_name, subject.subject_key, session_id, on_batch=progress)
            beat(sessions_done=index + 1, removed=removed, total=len(sessions))
        user_scope = eraser.erase_user_scope(subject.app_name, subject.subject_key)
        stranded = eraser.erase_everything_of(subject.app_name, subject.subject_key)
        return StepResult(
            "artifacts",
            {
                "sessions": len(sessions),
                "session_objects": removed,
                "user_scope_objects": user_scope,
                "stranded_objects": stranded,
                "resumed_from_heartbeat": int(state["resumed"]),
            },
        )
