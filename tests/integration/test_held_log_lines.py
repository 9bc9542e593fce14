"""A held writer's log line that mentions an erased subject stays readable for its writer (issue 39, finding 1).

Each line is sealed under every subject it names. The logs purge keeps a held writer B's line that mentions
the erased A, but the keys step then shreds A's key: before, the kept line could no longer be opened by
anyone and the receipt did not say so. Now the purge re-seals it without A's layer (still under B's key) in
the same locked rewrite, and the step and the check say how many held lines were kept readable; a line whose
A layer can no longer be lifted (A's key already gone) is kept as it is and counted as unreadable.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from stores.adapters.interface import Subject
from stores.logs.archive import LogLine
from stores.logs.sealing import UNREADABLE
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "held-log-lines-app"
RELEASED = "released"  # the clear field naming the subjects whose layer was lifted (``stores.logs.sealing``)


def _window() -> datetime:
    return datetime(2044, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (uuid.uuid4().int % 100_000))


def _raw(platform: Platform, key: str) -> list[bytes]:
    body = platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()
    return [line + b"\n" for line in body.split(b"\n") if line]


def _versions(platform: Platform, key: str) -> int:
    listing = platform.s3.list_object_versions(Bucket=platform.config.log_bucket, Prefix=key)
    return len([v for v in listing.get("Versions", []) if v["Key"] == key])


async def test_a_held_writers_line_mentioning_the_erased_subject_stays_readable(saga: SagaHarness) -> None:
    """B held, C not: A's own line and C's mention line go; B's mention line is kept and, after A's key is
    shredded, still opens (with B's key); the B-only line stays byte for byte; step and check count it."""
    platform = saga.platform
    a, b, c = user_ids(3, 3991, prefix="heldlog")
    await saga.seed(APP, [a, b, c])
    secret = platform.config.subject_secret
    sk_a, sk_b = subject_key(secret, APP, a), subject_key(secret, APP, b)
    ts = _window()
    b_words = f"forwarded ticket {uuid.uuid4().hex[:8]} to a colleague"
    key = platform.logs.ship(
        [
            LogLine(ts.isoformat(), APP, a, "info", "turn completed"),
            LogLine(ts.isoformat(), APP, b, "info", b_words, mentioned=(a,)),
            LogLine(ts.isoformat(), APP, b, "info", "b alone"),
            LogLine(ts.isoformat(), APP, c, "info", "c wrote about a colleague", mentioned=(a,)),
        ],
        ts,
        shard=1,
    )
    before = _raw(platform, key)
    assert platform.requests.place_hold(sk_b, APP, "litigation hold, case 39", "counsel@x.example")
    try:
        result = await saga.erase(APP, a)
        assert result.status == "completed"
        keys = next(s for s in result.steps if s.name == "keys")
        assert sum(keys.counts.values()) > 0  # A's keys are shredded: what follows reads after the shred
        after = _raw(platform, key)
        assert len(after) == 2  # A's own line and C's (unheld) mention line are gone
        assert after[1] == before[2]  # the B-only line, byte for byte
        assert _versions(platform, key) == 1  # no older version keeps A's layer
        records = platform.logs.read(key)
        opened = next(r for r in records if r.get("subject") == sk_b and r.get("mentions"))
        assert not opened.get(UNREADABLE), opened  # before: sealed under A's shredded key, unreadable
        assert (opened["user_id"], opened["msg"]) == (b, b_words)
        kept = json.loads(after[0])
        old = json.loads(before[1])
        assert {k: v for k, v in kept.items() if k not in ("sealed", RELEASED)} == {
            k: v for k, v in old.items() if k != "sealed"
        }  # same clear fields: still B's line, still naming A (a sweep after the hold finds it)
        assert kept[RELEASED] == [sk_a]
        assert b_words.encode() not in after[0]  # still sealed (under B's key)
        logs = next(s for s in result.steps if s.name == "logs")
        assert logs.counts.get("lines_held") == 1
        assert logs.counts.get("lines_held_readable") == 1
        assert "lines_held_unreadable" not in logs.counts
        body = saga.receipt_body(result.request_id)
        step = next(s for s in body["steps"] if s["name"] == "logs")
        assert step["counts"].get("lines_held_readable") == 1
        final = next(v for v in body["verifications"] if v["phase"] == "final")
        check = next(ch for ch in final["checks"] if ch["check"] == "logs")
        assert check["passed"], check
        assert check["counts"].get("lines_kept_under_owners_hold") == 1, check
        assert check["counts"].get("held_lines_readable_by_their_writers") == 1, check
        assert "readable by their writers" in check["detail"], check
        assert b not in check["detail"]
        assert sk_b not in check["detail"]
    finally:
        platform.requests.release_hold(sk_b, "case closed", "counsel@x.example")
    # the hold lifted, a later sweep of A finds the line by its clear mention and removes it
    swept = await asyncio.to_thread(
        platform.adapters.get("logs").sweep_before, Subject(result.request_id, sk_a, APP), None, None
    )
    assert swept.found.get("log_lines") == 1
    assert _raw(platform, key) == [before[2]]


async def test_a_held_line_whose_subject_key_is_already_gone_is_kept_and_said_unreadable(saga: SagaHarness) -> None:
    """A late line of held B mentioning A, shipped after A's key was shredded (the scheduled sweep's case):
    its A layer cannot be lifted, so it is kept byte for byte and counted as unreadable, never claimed
    readable."""
    platform = saga.platform
    a, b = user_ids(2, 3992, prefix="heldlog")
    await saga.seed(APP, [a, b])
    result = await saga.erase(APP, a)
    assert result.status == "completed"
    secret = platform.config.subject_secret
    sk_a, sk_b = subject_key(secret, APP, a), subject_key(secret, APP, b)
    ts = _window()
    # shipped after the shred: sealed under a fresh key of A's, then that key shredded too (as the sweep's
    # keys pass would); the archive cannot open A's layer any more
    key = platform.logs.ship([LogLine(ts.isoformat(), APP, b, "info", "late line", mentioned=(a,))], ts, shard=2)
    platform.keys.shred(sk_a)
    before = _raw(platform, key)
    assert platform.requests.place_hold(sk_b, APP, "hold", "counsel@x.example")
    try:
        swept = await asyncio.to_thread(
            platform.adapters.get("logs").sweep_before, Subject(result.request_id, sk_a, APP), None, None
        )
    finally:
        platform.requests.release_hold(sk_b, "done", "counsel@x.example")
    assert _raw(platform, key) == before
    assert swept.reported.get("log_lines_held") == 1
    assert swept.reported.get("log_lines_held_unreadable") == 1
