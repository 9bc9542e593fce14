"""The verifier's independent checks, as activities: one per store of the request's plan, and the fence.

``run_check`` runs one check per activity (verifications of requests filed before ``fewer-actions-v1``);
``run_checks`` runs every check of a verification in one activity, a few at once (``CHECKERS``), each with
its own queries and its own result, heartbeating the results so far after each.

Each store's check is its adapter's ``remaining`` (``stores.adapters``): its own queries, written apart
from the eraser's code, by indexed lookups, bypassing the write fence (which would make checks pass
vacuously). While the request still holds the raw user id, checks may use it; after completion
(re-verification) they run in subject-key mode: everything is found through the subject key, the session
tombstones and the recorded references. What a store reported is judged by ``verifier.checks`` (no I/O).

Fail closed: a check whose recorded input is missing (the step that records it never did) fails with
"input missing: ...", never passes having checked nothing; so does a check of a store no adapter on this
worker provides. On a request that already completed, every check counts only data dated before the
erasure (the ledger's ``erased_at`` and ``keys_shredded_at``): what a returning user wrote since is not a
leftover.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any

from temporalio import activity

from activities.support import PlatformActivities, beat, count, heartbeat_details, keep_sensitive
from stores.adapters.interface import Beat, Bound, Remaining
from stores.adapters.registry import AdapterConfigError, AdapterRegistry
from stores.adapters.tombstone_reads import tombstoned_sessions
from stores.books.request_record import RequestRecord
from stores.books.requests import FINAL_STATES
from stores.platform import Platform
from stores.privacy.identity import subject_key
from verifier.checks import CheckContext, judged, missing
from workflows.contracts.erasure import FENCE_CHECK, Activities, CheckInput, CheckResult, ChecksInput, ChecksResult

#: checks of one verification run at once: each is a few indexed reads and object listings, mostly waiting
CHECKERS = 4
#: heartbeat detail of ``run_checks``: the results of the checks done so far in this verification
_DONE = "checks_done"


@dataclass(frozen=True)
class _Request:
    user_id: str | None
    record: RequestRecord
    bound: Bound | None
    missing_bound: bool  # ended, and its erasure time is not recorded: every check fails closed


def _resumed(details: object) -> dict[str, CheckResult]:
    """The results a previous attempt's last heartbeat carried (anything malformed is checked again)."""
    out: dict[str, CheckResult] = {}
    for item in details if isinstance(details, list) else []:
        try:
            result = CheckResult(str(item["check"]), bool(item["passed"]), dict(item["counts"]), str(item["detail"]))
        except (KeyError, TypeError, ValueError):
            continue
        out[result.check] = result
    return out


class VerifierActivities(PlatformActivities):
    """``adapters``: the platform's registry unless given (embedding, tests that wrap one store)."""

    def __init__(self, platform: Platform, adapters: AdapterRegistry | None = None) -> None:
        super().__init__(platform)
        self._adapters = adapters

    @property
    def adapters(self) -> AdapterRegistry:
        return self._adapters if self._adapters is not None else self.platform.adapters

    @activity.defn(name=Activities.CHECK)
    def run_check(self, inp: CheckInput) -> CheckResult:
        request = self._request(inp.request_id, inp.subject_key, inp.app_name)
        result = self._judge(request, inp, lambda d: beat(**d))
        return self._failed(inp, result) if not result.passed else result

    @activity.defn(name=Activities.CHECKS)
    def run_checks(self, inp: ChecksInput) -> ChecksResult:
        """Every check of one verification, ``CHECKERS`` at once, each with its own queries and its own result.

        A heartbeat after each check carries the results so far (PII-free: names, counts, details), so a
        retry after an error or a worker crash runs only the checks that had no result yet; an error in a
        check fails the attempt (nothing passes unchecked) once every other check has ended and been kept, and
        the attempt is retried as ``run_check`` was."""
        done = _resumed(heartbeat_details({}).get(_DONE))
        request = self._request(inp.request_id, inp.subject_key, inp.app_name)
        lock = threading.Lock()

        def so_far() -> list[dict[str, Any]]:  # in the verification's order, whichever ended first
            with lock:
                return [asdict(done[name]) for name in inp.checks if name in done]

        def one(name: str) -> tuple[str, CheckResult]:
            check = CheckInput(inp.request_id, inp.subject_key, inp.app_name, name, inp.phase)
            # the check's own heartbeats carry the results so far: a retry resumes from whichever beat was last
            result = self._judge(request, check, lambda d: beat(**{**d, _DONE: so_far()}))
            return name, self._failed(check, result) if not result.passed else result

        errors: list[BaseException] = []
        with ThreadPoolExecutor(CHECKERS, thread_name_prefix="verify") as checkers:
            # each check in a copy of the activity's context: its heartbeats and log fields are the activity's
            todo = [name for name in inp.checks if name not in done]
            for finished in as_completed([checkers.submit(contextvars.copy_context().run, one, n) for n in todo]):
                try:
                    name, result = finished.result()
                except Exception as error:  # the others still end and are kept for the retry
                    errors.append(error)
                    continue
                with lock:
                    done[name] = result
                beat(**{_DONE: so_far()})
        if errors:
            raise errors[0]
        return ChecksResult([done[name] for name in inp.checks])

    def _request(self, request_id: str, key: str, app_name: str) -> _Request:
        """What every check of a request needs: the raw id (while the request holds it), its record, and
        on a request that already ended the bound of the erasure (``missing_bound``: it cannot be known)."""
        user_id = self.platform.requests.user_id(request_id)
        if user_id is not None and subject_key(self.platform.config.subject_secret, app_name, user_id) != key:
            user_id = None
        row = self.platform.requests.get(request_id)
        bound: Bound | None = None
        missing_bound = False
        if row.state in FINAL_STATES:
            entry = self.platform.ledger.entry(request_id)
            if entry is not None:
                bound = Bound(entry.erased_at, entry.keys_shredded_at)
            elif row.state == "failed" and row.completed_at is not None:
                bound = Bound(row.completed_at)
            else:
                missing_bound = True
        keep_sensitive(user_id or "")  # masked in logs and in any error, until the activity ends
        return _Request(user_id, row.record, bound, missing_bound)

    def _judge(self, request: _Request, inp: CheckInput, progress: Beat) -> CheckResult:
        if request.missing_bound:
            return missing(inp.check, "the erasure ledger entry of this completed request (its erasure time)")
        return self.check(CheckContext(inp, request.user_id, request.record, request.bound), progress)

    def _failed(self, inp: CheckInput, result: CheckResult) -> CheckResult:
        count("erasure_verification_failures", "failed verification checks", check=inp.check, phase=inp.phase)
        return result

    def check(self, ctx: CheckContext, progress: Beat | None = None) -> CheckResult:
        """One check: the fence's, or the store's adapter's ``remaining`` (``progress``: its heartbeats)."""
        name = ctx.inp.check
        if name == FENCE_CHECK:
            return self.check_fence(ctx)
        try:
            adapter = self.adapters.get(name)
        except AdapterConfigError:
            return missing(name, f"an adapter for the store {name!r} on this worker")
        found = adapter.remaining(ctx.subject, ctx.record, ctx.bound, progress or (lambda d: beat(**d)))
        return judged(name, found)

    def check_fence(self, ctx: CheckContext) -> CheckResult:
        if ctx.record.erased_sessions is None:
            return missing(FENCE_CHECK, "the sessions step's list of erased session ids")
        erased = set(ctx.record.erased_sessions)
        tombstoned = tombstoned_sessions(self.platform.pool, ctx.inp.subject_key)
        found = Remaining({"missing_tombstones": len(erased - tombstoned)}, reported={"erased_sessions": len(erased)})
        return judged(FENCE_CHECK, found, "every erased session is tombstoned")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.run_check, self.run_checks]
