"""The logs check's sample of the newest segments: it catches a line a shipper wrote without indexing it, and
its cost is bounded by the lines it reads, not by how busy the platform's recent windows were.

Real stack: the archive ships real segments; the shipper's failure is planted by deleting the subject's index
row after the ship, so only the sample can see the line (the index finds nothing, no segment is named).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from stores.adapters.interface import Subject
from stores.books.request_record import RequestRecord
from stores.logs.archive import LogLine
from stores.logs.reads import LogReads
from stores.platform import Platform
from stores.privacy.identity import subject_key
from verifier.checks import judged

pytestmark = pytest.mark.integration


def newest_window(platform: Platform) -> datetime:
    """A window after every segment shipped so far: what is shipped there is the newest."""
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT max(window_start) FROM log_segments").fetchone()
    latest = row[0] if row and row[0] else datetime.now(UTC)
    return max(latest, datetime.now(UTC)) + timedelta(days=1)


def ship(platform: Platform, app: str, users: list[str], at: datetime, lines_each: int = 1) -> str:
    ts = at.isoformat()
    lines = [LogLine(ts, app, u, "info", f"turn {n} of the agent") for u in users for n in range(lines_each)]
    return platform.logs.ship(lines, at, shard=90)


def test_a_line_the_shipper_failed_to_index_is_caught_by_the_recent_sample(platform: Platform) -> None:
    app, user, other = "sample-app", f"u-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    sk = subject_key(platform.config.subject_secret, app, user)
    key = ship(platform, app, [user, other], newest_window(platform))
    with platform.pool.connection() as conn:  # the shipper's failure: the segment holds the line, no index row
        conn.execute("DELETE FROM log_subject_index WHERE subject_key = %s", (sk,))
    adapter = platform.adapters.get("logs")
    subject = Subject(f"er_{uuid.uuid4().hex[:20]}", sk, app, user)

    found = adapter.remaining(subject, RequestRecord(purged_segments=[]), None, lambda _d: None)

    assert found.counts["index_entries"] == 0  # the index says nothing is left
    assert found.counts["lines_in_named_segments"] == 0  # and no segment was named
    assert found.counts["lines_in_recent_sample"] == 1  # the sample reads the newest segment and finds the line
    result = judged("logs", found)
    assert not result.passed
    assert "1 lines in recent sample remain" in result.detail

    platform.logs.purge_subject(key, app, sk)  # the line gone: the same check passes, the other user's kept
    after = adapter.remaining(subject, RequestRecord(purged_segments=[]), None, lambda _d: None)
    assert judged("logs", after).passed
    assert len(platform.logs.read_segment(key).records) == 1


def test_the_sample_stops_at_its_line_budget_and_always_reads_the_newest(platform: Platform) -> None:
    app = "sample-budget"
    start = newest_window(platform)
    keys = [ship(platform, app, [f"b{n}"], start + timedelta(minutes=5 * n), lines_each=10) for n in range(3)]
    newest_first = keys[::-1]
    reads = LogReads(platform.pool, platform.s3, platform.config.log_bucket, platform.logs.segment_lock)

    assert reads.recent_segments(20, None, 1_000)[:3] == newest_first  # under the budget: these, then older ones
    assert reads.recent_segments(20, None, 20) == newest_first[:2]  # 10 + 10 lines before the third: stop
    assert reads.recent_segments(20, None, 11) == newest_first[:2]  # 10 before the second: still under 11
    assert reads.recent_segments(20, None, 1) == newest_first[:1]  # the newest is always read
    assert reads.recent_segments(2, None, 1_000) == newest_first[:2]  # and at most ``limit`` segments
    before = start + timedelta(minutes=5)  # a completed request's bound: windows before its erasure only
    assert reads.recent_segments(20, before, 1_000)[0] == keys[0]
