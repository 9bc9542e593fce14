"""The request's recorded state: typed, versioned, and "never recorded" kept apart from "recorded empty"."""

from __future__ import annotations

import json

import pytest

from stores.books.request_record import RECORD_VERSION, CiphertextSample, LateSweepNote, RequestRecord
from stores.infra.errors import RecordInvalid


def test_round_trip_through_json_keeps_every_field() -> None:
    record = RequestRecord(
        canaries=["d1", "d2"],
        ciphertext_sample=CiphertextSample("0b7a0c3e-5b0e-4a4e-9d43-0f6f2b0b8f11", "QUJD"),
        sessions_at_start=2,
        found_at_start={"sessions": 2},
        erased_sessions=["s1"],
        derived_removed=[],
        purged_segments=["seg/1"],
        keys_shredded_at="2026-01-01T00:00:00+00:00",
        second_sweep={"memory_rows": 0},
        late_writer_sweeps=[LateSweepNote("2026-01-02T00:00:00+00:00", {"memory_rows": 1})],
    )
    stored = json.loads(json.dumps(record.to_json()))
    assert stored["version"] == RECORD_VERSION
    assert RequestRecord.from_json(stored) == record


def test_missing_and_empty_stay_distinct() -> None:
    empty = RequestRecord.from_json(RequestRecord(erased_sessions=[], canaries=[]).to_json())
    missing = RequestRecord.from_json(RequestRecord().to_json())
    assert empty.erased_sessions == [] and empty.begun  # noqa: PT018 - one fact: recorded, and empty
    assert missing.erased_sessions is None
    assert not missing.begun


def test_the_unversioned_record_of_before_is_read() -> None:
    legacy = {
        "canaries": ["d"],
        "ciphertext_sample": None,
        "erased_sessions": ["s1"],
        "erased_memory_ids": ["0b7a0c3e-5b0e-4a4e-9d43-0f6f2b0b8f11"],
        "derived_removed": ["0b7a0c3e-5b0e-4a4e-9d43-0f6f2b0b8f11"],
        "late_writer_sweeps": [{"at": "2026-01-01T00:00:00+00:00", "found": {"keys": 1}}],
    }
    record = RequestRecord.from_json(legacy)
    assert record.version == RECORD_VERSION
    assert record.erased_sessions == ["s1"]
    assert record.late_writer_sweeps == [LateSweepNote("2026-01-01T00:00:00+00:00", {"keys": 1})]
    assert record.purged_segments is None


@pytest.mark.parametrize("version", [0, 3, "2", None])
def test_an_unknown_version_is_refused(version: object) -> None:
    with pytest.raises(RecordInvalid, match="version"):
        RequestRecord.from_json({"version": version})


@pytest.mark.parametrize("key", ["erased_sesions", "erased_memory_ids", "raw_user_id"])
def test_an_unknown_or_misspelt_field_is_refused(key: str) -> None:
    with pytest.raises(RecordInvalid, match="unknown fields"):
        RequestRecord.from_json({"version": RECORD_VERSION, key: []})


def test_a_malformed_nested_value_is_refused() -> None:
    with pytest.raises(RecordInvalid, match="malformed"):
        RequestRecord.from_json({"version": RECORD_VERSION, "ciphertext_sample": {"blob": "x"}})
    with pytest.raises(RecordInvalid, match="not a JSON object"):
        RequestRecord.from_json([])  # type: ignore[arg-type]
