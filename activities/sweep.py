"""Second sweep: after the ingestion delay, erase anything a late writer slipped past the fence."""

from __future__ import annotations

from dataclasses import replace

from temporalio import activity

from activities.support import PlatformActivities, beat, count, translate_errors
from stores.identity import session_ref
from stores.platform import Platform
from stores.redaction import sensitive
from workflows.contracts import StepInput, StepResult


def sweep_subject(platform: Platform, request_id: str, subject_key: str, app_name: str, user_id: str) -> dict[str, int]:
    """Everything of the subject still present, in saga order; returns counts per store (all 0: clean)."""
    with sensitive(user_id):
        sessions = platform.sessions.session_ids(app_name, user_id)
        platform.ledger.mark_sessions(app_name, sessions, subject_key, request_id)
        if sessions:
            digests = set(platform.ledger.session_digests_of(subject_key))
            platform.requests.update_record(
                request_id, lambda r: replace(r, erased_sessions=sorted(set(r.erased_sessions or []) | digests))
            )
        artifacts = platform.artifacts.erase_everything_of(app_name, subject_key)
        beat(phase="artifacts", found=artifacts)
        counts = platform.sessions.erase_sessions(app_name, user_id, sessions)
        counts += platform.sessions.erase_user_state(app_name, user_id)
        refs = [session_ref(subject_key, s) for s in platform.ledger.sessions_of(subject_key)]
        memory = platform.memory.erase_user(subject_key, refs, request_id=request_id)
        beat(phase="memory", found=memory.rows + memory.derived)
        lines = 0
        for key in platform.logs.segments_of(subject_key):
            lines += platform.logs.purge_segment(key, app_name, user_id, subject_key)
        keys = platform.keys.shred(subject_key)
    return {
        "artifacts": artifacts,
        "sessions": counts.sessions,
        "events": counts.events,
        "user_states": counts.user_states,
        "memory_rows": memory.rows,
        "derived_rows": memory.derived,
        "log_lines": lines,
        "key_versions": keys,
    }


class SweepActivities(PlatformActivities):
    @activity.defn(name="second_sweep")
    @translate_errors
    def second_sweep(self, inp: StepInput) -> StepResult:
        subject = self.subject(inp.request_id, inp.subject_key, inp.app_name)
        found = sweep_subject(self.platform, inp.request_id, inp.subject_key, inp.app_name, subject.user_id)
        self.platform.requests.merge_record(inp.request_id, second_sweep=found)
        for store, n in found.items():
            count("erasure_late_writes_found", "late writes removed by sweeps", n, store=store, sweep="second")
        return StepResult("sweep", found)
