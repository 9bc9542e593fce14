"""Every verifier check fails closed: an input that was never recorded fails the check, it never passes
having checked nothing. The stores are replaced by a fake that answers "nothing left" to every read, so
only the recorded state decides."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from stores.request_record import RequestRecord
from verifier.checks import CheckContext, VerifierActivities
from verifier.reads import Bound
from workflows.contracts import CheckInput, CheckResult

SUBJECT = "sk_" + "a" * 40
COMPLETE = RequestRecord(
    canaries=["d1"],
    ciphertext_sample=None,
    erased_sessions=["s1"],
    derived_removed=[],
    purged_segments=[],
    keys_shredded_at="2026-01-01T00:00:00+00:00",
)


class NothingLeft:
    """Every read finds nothing (and remembers what it was asked)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        def read(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "user_session_rows":
                return {"sessions": 0, "events": 0, "user_states": 0}
            if name == "artifact_entries":
                return {"object_versions": 0, "delete_markers": 0}
            if name in ("tombstoned_sessions",):
                return {"s1"}
            if name == "erased_memory_ids":
                return []
            if name == "sample_decrypts":
                return False
            return 0

        return read


def verifier() -> tuple[VerifierActivities, NothingLeft]:
    acts = VerifierActivities(None)  # type: ignore[arg-type]
    fake = NothingLeft()
    acts.__dict__["reads"] = fake  # the cached property
    acts._belongs = lambda app, subject: lambda user: False  # type: ignore[method-assign]
    return acts, fake


def run(check: str, record: RequestRecord, bound: Bound | None = None) -> CheckResult:
    acts, _ = verifier()
    ctx = CheckContext(CheckInput("r1", SUBJECT, "app", check, "final"), "user-1", record, bound)
    result: CheckResult = getattr(acts, f"check_{check}")(ctx)
    return result


# check -> the record fields it needs (each, left unrecorded, must fail it)
NEEDS = {
    "sessions": ["erased_sessions"],
    "memory": ["erased_sessions", "derived_removed", "canaries"],
    "keys": ["keys_shredded_at", "canaries"],
    "fence": ["erased_sessions"],
    "logs": ["purged_segments"],
}


@pytest.mark.parametrize(("check", "field"), [(c, f) for c, fs in NEEDS.items() for f in fs])
def test_a_check_fails_when_an_input_was_never_recorded(check: str, field: str) -> None:
    result = run(check, dataclasses.replace(COMPLETE, **{field: None}))
    assert not result.passed
    assert result.detail.startswith("input missing: "), result.detail


@pytest.mark.parametrize("check", sorted(set(NEEDS) - {"logs"}))  # logs reads S3 itself (verifier.log_reads)
def test_the_same_check_passes_with_every_input_recorded_and_nothing_left(check: str) -> None:
    result = run(check, COMPLETE)
    assert result.passed, result


@pytest.mark.parametrize("check", sorted(set(NEEDS) - {"logs"}))
def test_a_fresh_record_fails_every_check_that_reads_one(check: str) -> None:
    assert not run(check, RequestRecord()).passed


def test_recorded_empty_lists_are_inputs_not_gaps() -> None:
    empty = dataclasses.replace(COMPLETE, erased_sessions=[], canaries=[], derived_removed=[])
    for check in ("sessions", "memory", "fence"):
        assert run(check, empty).passed, check


def test_a_completed_request_bounds_every_read_by_the_erasure_time() -> None:
    erased = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
    shredded = datetime(2026, 1, 1, 11, 59, tzinfo=UTC)
    bound = Bound(erased, shredded)
    acts, fake = verifier()
    for check in ("sessions", "artifacts", "memory", "keys"):
        ctx = CheckContext(CheckInput("r1", SUBJECT, "app", check, "final"), None, COMPLETE, bound)
        assert getattr(acts, f"check_{check}")(ctx).passed
    args = {name: a for name, a in fake.calls}
    assert args["rows_under_session_ids"][-1] == erased
    assert args["artifact_entries"][-1] == datetime(2026, 1, 1, 11, 59, 59, tzinfo=UTC)  # S3: whole seconds, -1 s
    assert args["own_memory_rows"][-1] == erased
    assert args["rows_with_digests"][-1] == erased
    assert args["wrapped_keys"][-1] == shredded
    assert args["kms_keys_still_usable"][-1] == shredded
    assert "user_session_rows" not in args  # the raw id is forgotten after completion
