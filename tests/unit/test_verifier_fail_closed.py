"""Every verifier check fails closed: an input that was never recorded fails the check, it never passes
having checked nothing. Each adapter's reads are replaced by a fake that answers "nothing left" to every
read, so only the recorded state decides; a store no adapter provides fails too."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from activities import verification
from activities.verification import VerifierActivities
from stores.adapters.interface import Bound
from stores.adapters.registry import AdapterConfigError
from stores.artifacts.adapter import ArtifactsAdapter
from stores.books.request_record import RequestRecord
from stores.keys.adapter import KeysAdapter
from stores.memory.adapter import MemoryAdapter
from stores.sessions.adapter import SessionsAdapter
from verifier import checks
from verifier.checks import CheckContext
from workflows.contracts.erasure import CheckInput, CheckResult

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
            if name in ("erased_memory_ids", "erased_session_ids"):
                return []
            if name == "sample_decrypts":
                return False
            if name in ("rows_with_digests", "rows_naming", "copies_carrying"):
                return 0, 0  # (rows left, rows kept under their owner's hold)
            return 0

        return read


class Registry:
    def __init__(self, adapters: dict[str, Any]) -> None:
        self.adapters = adapters

    def get(self, name: str) -> Any:
        if name not in self.adapters:
            raise AdapterConfigError(f"no adapter named {name!r}")
        return self.adapters[name]


def verifier(monkeypatch: pytest.MonkeyPatch) -> tuple[VerifierActivities, NothingLeft]:
    fake = NothingLeft()
    platform: Any = SimpleNamespace(pool=None, s3=None, kms=None, config=SimpleNamespace(subject_secret=b"s"))
    adapters = {}
    for cls in (SessionsAdapter, ArtifactsAdapter, MemoryAdapter, KeysAdapter):
        adapter = cls.__new__(cls)
        adapter.platform = platform
        adapter.reads = fake  # type: ignore[assignment]
        adapters[cls.name] = adapter
    adapters["sessions"]._belongs = lambda subject: lambda user: False  # type: ignore[method-assign]
    platform.adapters = Registry(adapters)
    monkeypatch.setattr(verification, "tombstoned_sessions", lambda pool, subject: {"s1"})
    return VerifierActivities(platform), fake


def run(monkeypatch: pytest.MonkeyPatch, check: str, record: RequestRecord, bound: Bound | None = None) -> CheckResult:
    acts, _ = verifier(monkeypatch)
    return acts.check(CheckContext(CheckInput("r1", SUBJECT, "app", check, "final"), "user-1", record, bound))


# check -> the record fields it needs (each, left unrecorded, must fail it)
NEEDS = {
    "sessions": ["erased_sessions"],
    "memory": ["erased_sessions", "derived_removed", "canaries"],
    "keys": ["keys_shredded_at", "canaries"],
    "fence": ["erased_sessions"],
}


@pytest.mark.parametrize(("check", "field"), [(c, f) for c, fs in NEEDS.items() for f in fs])
def test_a_check_fails_when_an_input_was_never_recorded(
    monkeypatch: pytest.MonkeyPatch, check: str, field: str
) -> None:
    result = run(monkeypatch, check, dataclasses.replace(COMPLETE, **{field: None}))
    assert not result.passed
    assert result.detail.startswith("input missing: "), result.detail


def test_the_logs_check_fails_when_its_segments_were_never_recorded() -> None:
    from stores.logs.adapter import LogsAdapter

    adapter = LogsAdapter.__new__(LogsAdapter)  # reads nothing before it looks at the record
    found = adapter.remaining(
        checks.Subject("r1", SUBJECT, "app", None), dataclasses.replace(COMPLETE, purged_segments=None), None, print
    )
    assert checks.judged("logs", found).detail.startswith("input missing: ")


@pytest.mark.parametrize("check", ["sessions", "artifacts", "memory", "keys", "fence"])
def test_the_same_check_passes_with_every_input_recorded_and_nothing_left(
    monkeypatch: pytest.MonkeyPatch, check: str
) -> None:
    result = run(monkeypatch, check, COMPLETE)
    assert result.passed, result


@pytest.mark.parametrize("check", ["sessions", "memory", "keys", "fence"])
def test_a_fresh_record_fails_every_check_that_reads_one(monkeypatch: pytest.MonkeyPatch, check: str) -> None:
    assert not run(monkeypatch, check, RequestRecord()).passed


def test_a_store_no_adapter_provides_fails_its_check(monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(monkeypatch, "vector_cache", COMPLETE)
    assert not result.passed
    assert result.detail == "input missing: an adapter for the store 'vector_cache' on this worker"


def test_recorded_empty_lists_are_inputs_not_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = dataclasses.replace(COMPLETE, erased_sessions=[], canaries=[], derived_removed=[])
    for check in ("sessions", "memory"):
        assert run(monkeypatch, check, empty).passed, check
    acts, _ = verifier(monkeypatch)
    monkeypatch.setattr(verification, "tombstoned_sessions", lambda pool, subject: set())
    ctx = CheckContext(CheckInput("r1", SUBJECT, "app", "fence", "final"), "user-1", empty, None)
    assert acts.check(ctx).passed


def test_a_completed_request_bounds_every_read_by_the_erasure_time(monkeypatch: pytest.MonkeyPatch) -> None:
    erased = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
    shredded = datetime(2026, 1, 1, 11, 59, tzinfo=UTC)
    bound = Bound(erased, shredded)
    acts, fake = verifier(monkeypatch)
    for check in ("sessions", "artifacts", "memory", "keys"):
        ctx = CheckContext(CheckInput("r1", SUBJECT, "app", check, "final"), None, COMPLETE, bound)
        assert acts.check(ctx).passed
    args = {name: a for name, a in fake.calls}
    assert args["rows_under_session_ids"][-1] == erased
    assert args["artifact_entries"][-1] == datetime(2026, 1, 1, 11, 59, 59, tzinfo=UTC)  # S3: whole seconds, -1 s
    assert args["own_memory_rows"][-1] == erased
    assert args["rows_with_digests"][-1] == erased
    assert args["wrapped_keys"][-1] == shredded
    assert args["kms_keys_still_usable"][-1] == shredded
    assert "user_session_rows" not in args  # the raw id is forgotten after completion
