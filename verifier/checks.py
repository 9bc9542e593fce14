"""The verifier's judgements: what a check's result is, given what a store reported (no I/O).

A check reads a store itself (its adapter's ``remaining``, run by ``activities.verification``, an activity
that bypasses the write fence); what it found becomes a ``CheckResult`` here. Fail closed: a check whose
recorded input is missing (the step that records it never did) fails with "input missing: ...", never passes
having checked nothing; anything left fails it.
"""

from __future__ import annotations

from dataclasses import dataclass

from stores.adapters.interface import Bound, Remaining, Subject
from stores.books.request_record import RequestRecord
from workflows.contracts.erasure import CheckInput, CheckResult


@dataclass(frozen=True)
class CheckContext:
    inp: CheckInput
    user_id: str | None  # None once the request forgot it: subject-key mode
    record: RequestRecord
    bound: Bound | None  # set on a request that completed: only data dated before the erasure counts

    @property
    def subject(self) -> Subject:
        return Subject(self.inp.request_id, self.inp.subject_key, self.inp.app_name, self.user_id)


def judged(check: str, found: Remaining, detail_ok: str = "nothing left") -> CheckResult:
    """A check's result from what its store reported: anything left or any missing input fails it."""
    if found.missing:
        return missing(check, *found.missing)
    bad = {k: v for k, v in found.counts.items() if v}
    left = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(bad.items()))
    detail = f"{left} remain" if bad else detail_ok
    if found.note:
        detail += "; " + found.note
    return CheckResult(check, not bad, {**found.counts, **found.reported}, detail)


def missing(check: str, *what: str) -> CheckResult:
    """Fail closed: the input this check needs was never recorded."""
    return CheckResult(check, False, {}, "input missing: " + "; ".join(what))
