"""``LogReads.old_versions``: the segment lock is taken only where old versions were seen, and then the count
is the one read under it (another user's purge between its put and its drop has finished by then)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from stores.logs.reads import LogReads

KEY = "logs/app/2026-12-06T07/seg-1.ndjson"


class FakeListing:
    """``list_object_versions`` pages of one segment: each listing answers the next of ``answers`` (the number
    of old versions then); other keys under the same prefix are never counted."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.listings = 0

    def get_paginator(self, name: str) -> FakeListing:
        assert name == "list_object_versions"
        return self

    def paginate(self, **_: Any) -> Iterator[dict[str, Any]]:
        old = self.answers[min(self.listings, len(self.answers) - 1)]
        self.listings += 1
        versions = [{"Key": KEY, "IsLatest": True}] + [{"Key": KEY, "IsLatest": False}] * old
        yield {"Versions": [*versions, {"Key": KEY + ".other", "IsLatest": False}], "DeleteMarkers": []}


def reads(listing: FakeListing, locked: list[str]) -> LogReads:
    @contextmanager
    def lock(key: str) -> Iterator[None]:
        locked.append(key)
        yield

    return LogReads(None, listing, "logs", lock)  # type: ignore[arg-type]


def test_a_segment_without_old_versions_is_answered_without_the_lock() -> None:
    locked: list[str] = []
    listing = FakeListing([0])
    assert reads(listing, locked).old_versions(KEY) == 0
    assert locked == []
    assert listing.listings == 1


def test_old_versions_seen_are_counted_again_under_the_lock() -> None:
    locked: list[str] = []
    listing = FakeListing([2, 2])
    assert reads(listing, locked).old_versions(KEY) == 2  # still there under the lock: a real leftover
    assert locked == [KEY]
    assert listing.listings == 2


def test_a_purge_caught_mid_way_is_waited_for_not_counted() -> None:
    locked: list[str] = []
    listing = FakeListing([1, 0])  # another user's purge had put its version, then dropped the old one
    assert reads(listing, locked).old_versions(KEY) == 0
    assert locked == [KEY]
