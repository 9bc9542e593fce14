"""Under-deletions the checks could not see (issue 28: item 12 and the verifier gaps of artifacts and cache).

Each test plants exactly one under-deletion against the real stack and shows the erase handles it and the
check fails while it is there: a mention-only log line in a segment shipped before mention keys existed (and
the index row that finds it), an incomplete multipart upload under the user's artifact prefix, and the
cache's per-subject index dropped before its entries. Other users' data stays byte-identical throughout.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stores.artifacts.bucket import artifact_prefix, user_prefix
from stores.logs.archive import LogArchive, LogLine
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.response_cache.cache import entry_key, index_key
from tests.adapter_wrap import open_request
from tests.saga_harness import SagaHarness
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyInput, VerifyResult

pytestmark = pytest.mark.integration
on_the_session_loop = pytest.mark.asyncio(loop_scope="session")


# ----- helpers ------------------------------------------------------------------------------------------


def window(year: int = 2043) -> datetime:
    """A window no other test ships into (segment keys are per window and shard)."""
    return datetime(year, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (uuid.uuid4().int % 100_000))


def raw_lines(platform: Platform, key: str) -> list[bytes]:
    body = platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()
    return io.BytesIO(body).readlines()


def line(ts: datetime, app: str, user: str | None, msg: str, mentioned: tuple[str, ...] = ()) -> LogLine:
    return LogLine(ts.isoformat(), app, user, "info", msg, mentioned=mentioned)


def ship_before_mention_keys(platform: Platform, lines: list[LogLine], ts: datetime, shard: int) -> str:
    """A segment as the shipper wrote it before mention keys existed: plain lines with no ``mentions``
    field, and an index row for every user a line names, mentioned users included (the old ``ship``)."""
    key = f"logs/{ts:%Y/%m/%d/%H%M}-shard{shard:02d}.jsonl"
    body = "".join(
        json.dumps(
            {"ts": ln.ts, "level": ln.level, "app": ln.app, "user_id": ln.user_id, "msg": ln.msg},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
        for ln in lines
    ).encode()
    platform.s3.put_object(Bucket=platform.config.log_bucket, Key=key, Body=body)
    secret, per_subject = platform.config.subject_secret, {}
    for ln in lines:
        for user in {u for u in (ln.user_id, *ln.mentioned) if u}:
            sk = subject_key(secret, ln.app, user)
            per_subject[sk] = per_subject.get(sk, 0) + 1
    with platform.pool.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO log_segments (segment_key, window_start, shard, line_count) VALUES (%s, %s, %s, %s)",
            (key, ts, shard, len(lines)),
        )
        for sk, n in per_subject.items():
            conn.execute(
                "INSERT INTO log_subject_index (subject_key, segment_key, line_count) VALUES (%s, %s, %s)",
                (sk, key, n),
            )
    return key


def put_only_version(platform: Platform, key: str, body: bytes) -> None:
    """Replace a segment's bytes leaving no older version behind (only the planted difference shows)."""
    bucket = platform.config.log_bucket
    new = platform.s3.put_object(Bucket=bucket, Key=key, Body=body).get("VersionId")
    listing = platform.s3.list_object_versions(Bucket=bucket, Prefix=key)
    for v in [*listing.get("Versions", []), *listing.get("DeleteMarkers", [])]:
        if v["Key"] == key and v.get("VersionId") not in (None, "null", new):
            platform.s3.delete_object(Bucket=bucket, Key=key, VersionId=v["VersionId"])


def sk_of(platform: Platform, app: str, user: str) -> str:
    return subject_key(platform.config.subject_secret, app, user)


def purge(platform: Platform, app: str, user: str) -> int:
    return platform.logs.purge_user(app, user, sk_of(platform, app, user))[1]


async def reverify(saga: SagaHarness, request_id: str) -> VerifyResult:
    row = saga.platform.requests.get(request_id)
    return await asyncio.wait_for(
        saga.client.execute_workflow(
            VERIFIER_WORKFLOW,
            VerifyInput(row.request_id, row.subject_key, row.app_name, "final"),
            id=f"reverify-{row.request_id}-{uuid.uuid4().hex[:8]}",
            task_queue=saga.settings.task_queue,
            result_type=VerifyResult,
        ),
        120,
    )


def check_of(result: VerifyResult, name: str) -> Any:
    return next(c for c in result.checks if c.check == name)


# ----- item 12: mention-only lines in segments shipped before mention keys -------------------------------


def test_a_mention_only_line_of_a_legacy_segment_goes_with_the_user_and_the_row_last(platform: Platform) -> None:
    app, ts = "gaps-legacy", window()
    key = ship_before_mention_keys(
        platform,
        [
            line(ts, app, "bob", "turn completed"),
            line(ts, app, None, "rate limit reached for bob", mentioned=("bob",)),
            line(ts, app, "carol", "escalated (bob) to tier 2.", mentioned=("bob",)),
            line(ts, app, "carol", "order 12345 shipped"),
            line(ts, app, "bobby", "rate limit reached for bobby"),
            line(ts, app, None, "bob.smith and bob_2 are not bob's"),
        ],
        ts,
        shard=1,
    )
    before = raw_lines(platform, key)
    sk = sk_of(platform, app, "bob")
    assert platform.logs.segments_of(sk) == [key]
    assert purge(platform, app, "bob") == 3
    assert raw_lines(platform, key) == before[3:]  # everyone else's lines, byte for byte
    assert platform.logs.segments_of(sk) == []
    assert platform.logs.segments_of(sk_of(platform, app, "bobby")) == [key]
    assert purge(platform, app, "bob") == 0  # idempotent
    assert raw_lines(platform, key) == before[3:]


def test_a_legacy_segment_whose_index_counts_no_mention_keeps_the_words(platform: Platform) -> None:
    """The index is the shipper's record: where it counts no mention-only line, the id in text is not one."""
    app, ts = "gaps-legacy-none", window()
    key = ship_before_mention_keys(
        platform,
        [line(ts, app, "12345", "login ok"), line(ts, app, "carol", "order 12345 shipped")],
        ts,
        shard=2,
    )
    before = raw_lines(platform, key)
    assert purge(platform, app, "12345") == 1
    assert raw_lines(platform, key) == before[1:]
    assert platform.logs.segments_of(sk_of(platform, app, "12345")) == []


def test_a_legacy_segment_whose_counts_disagree_keeps_the_row_and_guesses_nothing(platform: Platform) -> None:
    app, ts = "gaps-legacy-odd", window()
    key = ship_before_mention_keys(
        platform,
        [
            line(ts, app, "bob", "turn completed"),
            line(ts, app, None, "rate limit reached for bob", mentioned=("bob",)),
            line(ts, app, "carol", "ask bob about it"),  # the logging code did not record this one
        ],
        ts,
        shard=3,
    )
    before = raw_lines(platform, key)
    sk = sk_of(platform, app, "bob")
    assert purge(platform, app, "bob") == 1  # bob's own line: the two texts cannot be told apart
    assert raw_lines(platform, key) == before[1:]
    assert platform.logs.segments_of(sk) == [key]  # the row stays while lines it counts may remain
    assert purge(platform, app, "bob") == 0
    assert platform.logs.segments_of(sk) == [key]


def test_a_legacy_purge_cut_after_its_rewrite_finishes_on_retry(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, ts = "gaps-legacy-crash", window()
    key = ship_before_mention_keys(
        platform,
        [
            line(ts, app, "bob", "turn completed"),
            line(ts, app, None, "rate limit reached for bob", mentioned=("bob",)),
            line(ts, app, "carol", "hello"),
        ],
        ts,
        shard=4,
    )
    before = raw_lines(platform, key)
    sk = sk_of(platform, app, "bob")

    class Killed(Exception):
        pass

    def killed(self: LogArchive, key: str, keep_version: str | None) -> None:
        raise Killed  # the worker died after the new object was written, before old versions and the row

    with monkeypatch.context() as m:
        m.setattr(LogArchive, "_drop_old_versions", killed)
        with pytest.raises(Killed):
            purge(platform, app, "bob")
    assert raw_lines(platform, key) == before[2:]
    assert platform.logs.segments_of(sk) == [key]  # the retry finds the segment
    assert purge(platform, app, "bob") == 0
    assert platform.logs.segments_of(sk) == []
    assert platform.logs.old_versions(key) == 0
    assert raw_lines(platform, key) == before[2:]


@on_the_session_loop
async def test_the_erasure_removes_a_legacy_mention_and_the_check_fails_on_one_left(saga: SagaHarness) -> None:
    platform = saga.platform
    app = "gaps-legacy-saga"
    await saga.seed(app, ["bob", "grace@example.org"], "small", 94)
    ts = window()
    key = ship_before_mention_keys(
        platform,
        [
            line(ts, app, None, "rate limit reached for bob", mentioned=("bob",)),
            line(ts, app, "grace@example.org", "grace's own line"),
        ],
        ts,
        shard=5,
    )
    others = raw_lines(platform, key)[1:]
    result = await saga.erase(app, "bob")
    assert result.status == "completed", result
    assert raw_lines(platform, key) == others
    assert check_of(await reverify(saga, result.request_id), "logs").passed
    # an eraser that kept the line (and dropped the row that finds it): the check sees it by itself
    left = b'{"ts":"t","level":"info","app":"%s","user_id":null,"msg":"rate limit reached for bob"}\n'
    put_only_version(platform, key, b"".join([left % app.encode(), *others]))
    again = check_of(await reverify(saga, result.request_id), "logs")
    assert not again.passed
    assert again.counts["legacy_mention_lines"] == 1
    assert again.counts["old_segment_versions"] == 0  # the planted line is what fails the check


# ----- artifacts: incomplete multipart uploads ----------------------------------------------------------


def start_upload(platform: Platform, app: str, sk: str, body: bytes) -> tuple[str, str]:
    """A multipart upload of an artifact version, one part sent, never completed: (key, upload id)."""
    bucket = platform.config.artifact_bucket
    key = artifact_prefix(app, sk, "scan.pdf", "session-1") + "0"
    upload_id = platform.s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    platform.s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)
    return key, upload_id


def uploads_under(platform: Platform, prefix: str) -> list[tuple[str, str]]:
    listing = platform.s3.list_multipart_uploads(Bucket=platform.config.artifact_bucket, Prefix=prefix)
    return [(u["Key"], u["UploadId"]) for u in listing.get("Uploads", [])]


def test_an_incomplete_multipart_upload_is_aborted_and_the_check_fails_while_it_is_there(
    platform: Platform,
) -> None:
    app = "gaps-mpu"
    subject = open_request(platform, app, f"mpu-{uuid.uuid4().hex[:8]}")
    other = sk_of(platform, app, f"mpu-{uuid.uuid4().hex[:8]}")
    bucket, adapter = platform.config.artifact_bucket, platform.adapters.get("artifacts")
    mine = start_upload(platform, app, subject.subject_key, b"the user's prescription, part 1")
    theirs = start_upload(platform, app, other, b"another user's upload, part 1")
    theirs_parts = platform.s3.list_parts(Bucket=bucket, Key=theirs[0], UploadId=theirs[1])["Parts"]
    assert uploads_under(platform, user_prefix(app, subject.subject_key)) == [mine]  # SeaweedFS lists them

    record = platform.requests.record(subject.request_id)
    left = adapter.remaining(subject, record, None, lambda _d: None)
    assert any(left.counts.values()), left.counts  # the check sees the upload
    assert left.counts["incomplete_uploads"] == 1

    counts = adapter.erase(subject, {}, lambda _d: None)
    assert counts["incomplete_uploads"] == 1
    assert uploads_under(platform, user_prefix(app, subject.subject_key)) == []
    assert not any(adapter.remaining(subject, record, None, lambda _d: None).counts.values())
    assert adapter.erase(subject, {}, lambda _d: None)["incomplete_uploads"] == 0  # idempotent
    # the other user's upload, its parts as they were
    assert uploads_under(platform, user_prefix(app, other)) == [theirs]
    assert platform.s3.list_parts(Bucket=bucket, Key=theirs[0], UploadId=theirs[1])["Parts"] == theirs_parts
    platform.s3.abort_multipart_upload(Bucket=bucket, Key=theirs[0], UploadId=theirs[1])


# ----- cache: the per-subject index dropped before its entries -------------------------------------------


def cache_state(platform: Platform, app: str, sk: str) -> dict[str, Any]:
    """The subject's index (members and scores) and every entry's raw bytes, read by their keys."""
    client = platform.response_cache.client
    index = client.zrange(index_key(app, sk), 0, -1, withscores=True)
    return {"index": index, "entries": {m: client.get(entry_key(app, sk, m.decode())) for m, _score in index}}


def test_an_entry_whose_index_was_dropped_first_is_still_found(platform: Platform) -> None:
    app, cache = "gaps-cache", platform.response_cache
    target, other = f"cache-{uuid.uuid4().hex[:8]}", f"cache-{uuid.uuid4().hex[:8]}"
    sk, other_sk = sk_of(platform, app, target), sk_of(platform, app, other)
    for n in range(3):
        assert cache.put(app, target, f"my prompt {n}", f"my answer {n}")
    assert cache.put(app, other, "their prompt", "their answer")
    theirs = cache_state(platform, app, other_sk)
    assert cache.orphaned_entries(app, sk) == 0
    cache.client.unlink(index_key(app, sk))  # the under-deletion: the index went before its entries were read
    assert cache.orphaned_entries(app, sk) == 3  # found by their keys, without the index
    assert cache.orphaned_entries(app, other_sk) == 0
    assert cache_state(platform, app, other_sk) == theirs
    for n in range(3):  # clean up what the planted bug left
        cache.client.unlink(entry_key(app, sk, cache.digest(app, sk, f"my prompt {n}")))


def test_the_cache_erase_never_drops_the_index_before_its_entries(platform: Platform) -> None:
    app, cache = "gaps-cache-order", platform.response_cache
    target, other = f"cache-{uuid.uuid4().hex[:8]}", f"cache-{uuid.uuid4().hex[:8]}"
    sk, other_sk = sk_of(platform, app, target), sk_of(platform, app, other)
    for n in range(7):
        assert cache.put(app, target, f"my prompt {n}", f"my answer {n}")
    assert cache.put(app, other, "their prompt", "their answer")
    theirs = cache_state(platform, app, other_sk)
    seen: list[str] = []

    class Killed(Exception):
        pass

    def crash_on_second_batch(digests: list[str]) -> None:
        if seen:
            raise Killed  # the worker died after recording its second batch, before deleting it
        seen.extend(digests)

    with pytest.raises(Killed):
        cache.erase_entries(app, sk, on_batch=crash_on_second_batch, batch=3)
    assert cache.client.zcard(index_key(app, sk)) == 4  # the index still names every entry left
    assert cache.orphaned_entries(app, sk) == 0
    recorded: list[str] = []
    assert cache.erase_entries(app, sk, on_batch=recorded.extend, batch=3) == 4  # the retry finds them all
    assert cache.client.exists(index_key(app, sk)) == 0
    assert cache.orphaned_entries(app, sk) == 0
    assert sorted(seen + recorded) == sorted(cache.digest(app, sk, f"my prompt {n}") for n in range(7))
    assert cache_state(platform, app, other_sk) == theirs


@on_the_session_loop
async def test_an_erase_that_drops_the_cache_index_first_fails_the_cache_check(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planted defect of the issue: the cache's per-subject index dropped before its entries were read
    (every entry orphaned until its TTL) ended ``completed``: the index was empty and the erase recorded
    nothing to look for. The digests captured at the request's start are read back by key."""
    from stores.response_cache.adapter import ResponseCacheAdapter
    from workers.stack.seeding.seeder import user_ids

    platform = saga.platform
    app = "gaps-cache"
    target, other = user_ids(2, 2861, prefix="gaps")
    await saga.seed(app, [target, other])
    for n in range(3):
        assert platform.response_cache.put(app, target, f"question {n}?", f"answer {n}")
    platform.response_cache.put(app, other, "question 0?", "answer 0")
    cache = platform.adapters.get("response_cache")
    before_other = cache.fingerprint(app, other)
    held = int(
        platform.response_cache.client.zcard(index_key(app, subject_key(platform.config.subject_secret, app, target)))
    )
    assert held >= 3  # the seeder's entries and these three

    def dropped_first(self: ResponseCacheAdapter, subject: Any, before: Any, beat: Any, removed: int = 0) -> int:
        self.cache.client.unlink(index_key(subject.app_name, subject.subject_key))  # the entries are orphaned
        return removed

    def never_by_key_space(self: ResponseCacheAdapter, subject: Any, *, stale_only: bool) -> int:
        return 0  # and the pass by the user's key space (the eraser's own recovery from a lost index) skipped

    monkeypatch.setattr(ResponseCacheAdapter, "_erase_from_index", dropped_first)
    monkeypatch.setattr(ResponseCacheAdapter, "_erase_unindexed", never_by_key_space)
    result = await saga.erase(app, target)
    assert result.status == "verification_failed"
    body = saga.receipt_body(result.request_id)
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    check = next(c for c in final["checks"] if c["check"] == "response_cache")
    assert not check["passed"]
    assert check["counts"]["entries_from_start_left"] == held
    assert check["counts"]["indexed_entries"] == 0  # what the old check read: nothing
    assert check["counts"]["unindexed_entries"] == held  # found by the user's key space too
    assert cache.fingerprint(app, other) == before_other
