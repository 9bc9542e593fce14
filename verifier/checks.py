"""The verifier's independent checks: each reads one store directly, by indexed lookups.

Checks bypass the write fence (which would make them pass vacuously). While the request still holds
the raw user id, checks use it; after completion (re-verification) they run in subject-key mode:
everything is found through the subject key, the session tombstones and the recorded references, and
only the free-text log scan for the raw id, which needs the id itself, is reported as not run.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio import activity

from activities.support import PlatformActivities, beat, count, translate_errors
from stores.errors import CiphertextInvalid, DataKeyShredded
from stores.identity import session_ref, subject_key
from stores.logs import line_of_user
from stores.redaction import sensitive
from workflows.contracts import CheckInput, CheckResult

RECENT_LOG_SAMPLE = 20
LOG_READERS = 4  # segments read at once (each old-version listing briefly holds a pooled connection)


def _result(check: str, counts: dict[str, int], detail_ok: str = "nothing left") -> CheckResult:
    bad = {k: v for k, v in counts.items() if v}
    if not bad:
        return CheckResult(check, True, counts, detail_ok)
    detail = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(bad.items())) + " remain"
    return CheckResult(check, False, counts, detail)


class VerifierActivities(PlatformActivities):
    @activity.defn(name="run_check")
    @translate_errors
    def run_check(self, inp: CheckInput) -> CheckResult:
        checks: dict[str, Callable[[CheckInput, str | None, dict[str, Any]], CheckResult]] = {
            "sessions": self.check_sessions,
            "artifacts": self.check_artifacts,
            "memory": self.check_memory,
            "logs": self.check_logs,
            "keys": self.check_keys,
            "fence": self.check_fence,
        }
        if inp.check not in checks:
            raise ValueError(f"unknown check {inp.check}")
        user_id = self.platform.requests.user_id(inp.request_id)
        if user_id is not None and subject_key(self.platform.config.subject_secret, inp.app_name, user_id) != (
            inp.subject_key
        ):
            user_id = None
        record = self.platform.requests.get(inp.request_id).record
        with sensitive(user_id or ""):
            result = checks[inp.check](inp, user_id, record)
        if not result.passed:
            count("erasure_verification_failures", "failed verification checks", check=inp.check, phase=inp.phase)
        return result

    def _belongs(self, app_name: str, subject: str) -> Callable[[str], bool]:
        secret = self.platform.config.subject_secret
        return lambda user: subject_key(secret, app_name, user) == subject

    def check_sessions(self, inp: CheckInput, user_id: str | None, record: dict[str, Any]) -> CheckResult:
        store = self.platform.sessions
        erased = list(record.get("erased_sessions", []))
        leftovers = store.owners_of_session_ids(inp.app_name, erased, self._belongs(inp.app_name, inp.subject_key))
        counts = {"sessions_under_erased_ids": sum(len(v) for v in leftovers.values())}
        if user_id is not None:
            live = store.count_user(inp.app_name, user_id)
            counts.update({"sessions": live.sessions, "events": live.events, "user_states": live.user_states})
        return _result("sessions", counts)

    def check_artifacts(self, inp: CheckInput, _user: str | None, _record: dict[str, Any]) -> CheckResult:
        listing = self.platform.artifacts.count_user(inp.app_name, inp.subject_key)
        return _result("artifacts", {"object_versions": listing.versions, "delete_markers": listing.delete_markers})

    def check_memory(self, inp: CheckInput, _user: str | None, record: dict[str, Any]) -> CheckResult:
        memory = self.platform.memory
        refs = [session_ref(inp.subject_key, s) for s in record.get("erased_sessions", [])]
        own = memory.count_own(inp.subject_key)
        derived = memory.count_derived_from(record.get("erased_memory_ids", []), refs)
        canaries = memory.count_with_digests(record.get("canaries", []))
        return _result(
            "memory", {"rows_of_user": own, "derived_rows_naming_erased": derived, "rows_matching_canaries": canaries}
        )

    def check_logs(self, inp: CheckInput, user_id: str | None, record: dict[str, Any]) -> CheckResult:
        archive = self.platform.logs
        belongs = self._belongs(inp.app_name, inp.subject_key)
        named = list(record.get("purged_segments", []))

        def inspect(key: str) -> tuple[int, int]:
            """(the subject's lines, old versions) of one named segment; (0, 0) once it is gone."""
            records = archive.read_if_exists(key)
            if records is None:
                return 0, 0
            found = 0
            for r in records:
                by_field = r.get("app") == inp.app_name and isinstance(r.get("user_id"), str) and belongs(r["user_id"])
                if by_field or (user_id is not None and line_of_user(r, inp.app_name, user_id)):
                    found += 1
            return found, archive.old_versions(key)

        lines = old_versions = 0
        with ThreadPoolExecutor(LOG_READERS, thread_name_prefix="verify-logs") as readers:
            for n, (found, old) in enumerate(readers.map(inspect, named)):  # results in order, beats here
                lines += found
                old_versions += old
                beat(segments_checked=n + 1)
        counts = {
            "index_entries": len(archive.segments_of(inp.subject_key)),
            "lines_in_named_segments": lines,
            "old_segment_versions": old_versions,
        }
        if user_id is not None:
            sample = archive.recent_segments(RECENT_LOG_SAMPLE)
            counts["lines_in_recent_sample"] = archive.count_user_lines(sample, inp.app_name, user_id, LOG_READERS)
            return _result("logs", counts)
        result = _result("logs", counts)
        return CheckResult(result.check, result.passed, result.counts, result.detail + "; raw-id sample scan not run")

    def check_keys(self, inp: CheckInput, _user: str | None, record: dict[str, Any]) -> CheckResult:
        remaining = self.platform.keys.count(inp.subject_key)
        sample = record.get("ciphertext_sample")
        readable = 0
        if sample:
            blob = base64.b64decode(sample["blob"])
            try:
                self.platform.memory_store.decrypt_row(uuid.UUID(sample["memory_id"]), blob)
                readable = 1
            except (DataKeyShredded, CiphertextInvalid):
                readable = 0
        result = _result("keys", {"wrapped_keys": remaining, "sample_still_decrypts": readable})
        if not sample and result.passed:
            return CheckResult("keys", True, result.counts, "no wrapped key left; no ciphertext sample was captured")
        return result

    def check_fence(self, inp: CheckInput, _user: str | None, record: dict[str, Any]) -> CheckResult:
        erased = set(record.get("erased_sessions", []))
        tombstoned = set(self.platform.ledger.sessions_of(inp.subject_key))
        result = _result(
            "fence", {"missing_tombstones": len(erased - tombstoned)}, "every erased session is tombstoned"
        )
        return CheckResult(
            result.check, result.passed, {**result.counts, "erased_sessions": len(erased)}, result.detail
        )
