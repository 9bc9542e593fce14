"""The verifier's independent checks: each reads one store directly, by indexed lookups.

Checks bypass the write fence (which would make them pass vacuously). While the request still holds
the raw user id, checks use it; after completion (re-verification) they run in subject-key mode:
everything is found through the subject key, the session tombstones and the recorded references (log
lines are matched structurally, by subject key, in both modes: no free-text scan).

Fail closed: a check whose recorded input is missing (the step that records it never did) fails with
"input missing: ...", never passes having checked nothing. Each check's read path is its own
(``verifier.reads``; the log check's in ``verifier.log_reads``), not the eraser's code. On a request
that already completed, every check counts only data dated before the erasure (the ledger's
``erased_at`` and ``keys_shredded_at``): what a returning user wrote since is not a leftover.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

from temporalio import activity

from activities.support import PlatformActivities, beat, count, keep_sensitive, translate_errors
from stores.errors import InvalidIdentifier
from stores.identity import subject_key
from stores.request_record import RequestRecord
from stores.requests import FINAL_STATES
from verifier.log_reads import LogReads, SegmentScan, SubjectLineRule
from verifier.reads import Bound, VerifierReads
from workflows.contracts import CheckInput, CheckResult

RECENT_LOG_SAMPLE = 20
LOG_READERS = 4  # segments read at once (each old-version listing briefly holds a pooled connection)


@dataclass(frozen=True)
class CheckContext:
    inp: CheckInput
    user_id: str | None  # None once the request forgot it: subject-key mode
    record: RequestRecord
    bound: Bound | None  # set on a request that completed: only data dated before the erasure counts


def _result(check: str, counts: dict[str, int], detail_ok: str = "nothing left") -> CheckResult:
    bad = {k: v for k, v in counts.items() if v}
    if not bad:
        return CheckResult(check, True, counts, detail_ok)
    detail = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(bad.items())) + " remain"
    return CheckResult(check, False, counts, detail)


def missing(check: str, *what: str) -> CheckResult:
    """Fail closed: the input this check needs was never recorded."""
    return CheckResult(check, False, {}, "input missing: " + "; ".join(what))


class VerifierActivities(PlatformActivities):
    @cached_property
    def reads(self) -> VerifierReads:
        config = self.platform.config
        return VerifierReads(
            self.platform.pool, self.platform.s3, self.platform.kms, config.artifact_bucket, config.subject_secret
        )

    @activity.defn(name="run_check")
    @translate_errors
    def run_check(self, inp: CheckInput) -> CheckResult:
        checks: dict[str, Callable[[CheckContext], CheckResult]] = {
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
        row = self.platform.requests.get(inp.request_id)
        bound: Bound | None = None
        if row.state in FINAL_STATES:
            entry = self.platform.ledger.entry(inp.request_id)
            if entry is not None:
                bound = Bound(entry.erased_at, entry.keys_shredded_at)
            elif row.state == "failed" and row.completed_at is not None:
                bound = Bound(row.completed_at)
            else:
                result = missing(inp.check, "the erasure ledger entry of this completed request (its erasure time)")
                count("erasure_verification_failures", "failed verification checks", check=inp.check, phase=inp.phase)
                return result
        ctx = CheckContext(inp, user_id, row.record, bound)
        keep_sensitive(user_id or "")  # masked in logs and in any error, until the check ends
        result = checks[inp.check](ctx)
        if not result.passed:
            count("erasure_verification_failures", "failed verification checks", check=inp.check, phase=inp.phase)
        return result

    def _belongs(self, app_name: str, subject: str) -> Callable[[str], bool]:
        secret = self.platform.config.subject_secret

        def belongs(user: str) -> bool:
            try:
                return subject_key(secret, app_name, user) == subject
            except InvalidIdentifier:  # an id no store could hold is nobody's: counted as not the subject
                return False

        return belongs

    def check_sessions(self, ctx: CheckContext) -> CheckResult:
        inp, erased = ctx.inp, ctx.record.erased_sessions
        if erased is None:
            return missing("sessions", "the sessions step's list of erased session ids")
        before = ctx.bound.erased_at if ctx.bound else None
        ids = self.reads.erased_session_ids(inp.subject_key, erased)  # a digest with no tombstone: the fence check
        counts = {
            "sessions_under_erased_ids": self.reads.rows_under_session_ids(
                inp.app_name, ids, self._belongs(inp.app_name, inp.subject_key), before
            )
        }
        if ctx.user_id is not None and ctx.bound is None:
            counts.update(self.reads.user_session_rows(inp.app_name, ctx.user_id))
        return _result("sessions", counts)

    def check_artifacts(self, ctx: CheckContext) -> CheckResult:
        before = ctx.bound.s3_cutoff if ctx.bound else None
        return _result("artifacts", self.reads.artifact_entries(ctx.inp.app_name, ctx.inp.subject_key, before))

    def check_memory(self, ctx: CheckContext) -> CheckResult:
        record, subject = ctx.record, ctx.inp.subject_key
        destroyed = record.canaries is None and record.canaries_destroyed  # by finish_request, on purpose
        absent = [
            what
            for what, value in (
                ("the sessions step's list of erased session ids", record.erased_sessions),
                ("the memory step's record of erased rows", record.derived_removed),
                ("the canary digests captured at the start", [] if destroyed else record.canaries),
            )
            if value is None
        ]
        if absent or record.erased_sessions is None:
            return missing("memory", *absent)
        before = ctx.bound.erased_at if ctx.bound else None
        counts = {
            "rows_of_user": self.reads.own_memory_rows(subject, before),
            "rows_naming_erased": self.reads.rows_naming(
                subject,
                self.reads.erased_memory_ids(subject),
                self.reads.erased_session_ids(subject, record.erased_sessions),
            ),
        }
        if record.canaries is not None:
            counts["rows_matching_canaries"] = self.reads.rows_with_digests(record.canaries, before)
        result = _result("memory", counts)
        if destroyed:  # a re-verification after completion: said, never silently skipped
            detail = result.detail + "; canary digests destroyed at completion, canary scan not run"
            return CheckResult(result.check, result.passed, result.counts, detail)
        return result

    def check_logs(self, ctx: CheckContext) -> CheckResult:
        """Structural identity only (``verifier.log_reads``): the subject's index rows, its lines in the
        segments the logs step named and in the most recent segments; others' malformed lines are counted
        and reported, never a failure. On a completed request, only segments dated before the erasure."""
        inp = ctx.inp
        if ctx.record.purged_segments is None:
            return missing("logs", "the logs step's list of purged segments")
        platform = self.platform
        reads = LogReads(platform.pool, platform.s3, platform.config.log_bucket, platform.logs.segment_lock)
        rule = SubjectLineRule(platform.config.subject_secret, inp.app_name, inp.subject_key)
        before = ctx.bound.erased_at if ctx.bound else None
        named = sorted(set(ctx.record.purged_segments))
        sample = [k for k in reads.recent_segments(RECENT_LOG_SAMPLE, before) if k not in set(named)]

        def inspect(key: str) -> tuple[SegmentScan, int]:
            """(scan, old versions) of one segment; nothing once it is gone. Old versions of named ones."""
            body = reads.body(key)
            if body is None:
                return SegmentScan(), 0
            return rule.scan(body), reads.old_versions(key) if key in named else 0

        named_lines = sample_lines = old_versions = malformed = 0
        with ThreadPoolExecutor(LOG_READERS, thread_name_prefix="verify-logs") as readers:
            for n, (scan, old) in enumerate(readers.map(inspect, named + sample)):  # in order; beats here
                if n < len(named):
                    named_lines += scan.subject_lines
                else:
                    sample_lines += scan.subject_lines
                old_versions += old
                malformed += scan.malformed_lines
                beat(segments_checked=n + 1)
        result = _result(
            "logs",
            {
                "index_entries": reads.index_entries(inp.subject_key, before),
                "lines_in_named_segments": named_lines,
                "old_segment_versions": old_versions,
                "lines_in_recent_sample": sample_lines,
            },
        )
        detail = result.detail + (f"; {malformed} malformed lines of others kept as they were" if malformed else "")
        return CheckResult(result.check, result.passed, {**result.counts, "malformed_lines": malformed}, detail)

    def check_keys(self, ctx: CheckContext) -> CheckResult:
        record, subject = ctx.record, ctx.inp.subject_key
        absent = [
            what
            for what, value in (
                ("the keys step's shred time", record.keys_shredded_at),
                ("the ciphertext sample capture at the start", [] if record.canaries_destroyed else record.canaries),
            )
            if value is None
        ]
        if absent:
            return missing("keys", *absent)
        before = ctx.bound.keys_cutoff if ctx.bound else None
        counts = {
            "wrapped_keys": self.reads.wrapped_keys(subject, before),
            "kms_keys_not_pending_deletion": self.reads.kms_keys_still_usable(subject, before),
        }
        sample = record.ciphertext_sample
        if sample is not None:
            counts["sample_still_decrypts"] = int(
                self.reads.sample_decrypts(sample.memory_id, base64.b64decode(sample.blob))
            )
        result = _result("keys", counts)
        if sample is None and result.passed:
            why = "destroyed after completion" if record.ciphertext_sample_destroyed else "none was captured"
            return CheckResult("keys", True, result.counts, f"no wrapped key left; ciphertext sample {why}")
        return result

    def check_fence(self, ctx: CheckContext) -> CheckResult:
        if ctx.record.erased_sessions is None:
            return missing("fence", "the sessions step's list of erased session ids")
        erased = set(ctx.record.erased_sessions)
        tombstoned = self.reads.tombstoned_sessions(ctx.inp.subject_key)
        result = _result(
            "fence", {"missing_tombstones": len(erased - tombstoned)}, "every erased session is tombstoned"
        )
        return CheckResult(
            result.check, result.passed, {**result.counts, "erased_sessions": len(erased)}, result.detail
        )
