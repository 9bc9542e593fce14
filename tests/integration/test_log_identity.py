"""Log lines are a user's by structured identity only; bad lines of others are kept and counted.

Issue 12, items 1, 3 and 10: a number or an address in another user's free text is not the user; a mention
in another app is not the user; a mention-only line goes with the user (and the verifier notices one left
behind); a malformed line or a malformed ``user_id`` in a shared segment neither blocks the erasure nor
changes a byte of anyone else's lines.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from stores.infra.errors import InvalidIdentifier
from stores.logs.adapter import LogsAdapter
from stores.logs.archive import LogArchive, LogLine, SubjectLines, Verdict
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adapter_wrap import wired
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker
from workflows.contracts.erasure import (
    SWEEP_WORKFLOW,
    VERIFIER_WORKFLOW,
    SweepInput,
    SweepResult,
    VerifyInput,
    VerifyResult,
)

pytestmark = pytest.mark.integration


def window(year: int = 2041) -> datetime:
    """A window no other test ships into (segment keys are per window and shard)."""
    return datetime(year, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (uuid.uuid4().int % 100_000))


def raw_lines(platform: Platform, key: str) -> list[bytes]:
    body = platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()
    return io.BytesIO(body).readlines()  # split after each b"\n" only, line ends kept


def put_raw(platform: Platform, key: str, lines: list[bytes]) -> None:
    platform.s3.put_object(Bucket=platform.config.log_bucket, Key=key, Body=b"".join(lines))


def line(ts: datetime, app: str, user: str | None, msg: str, mentioned: tuple[str, ...] = ()) -> LogLine:
    return LogLine(ts.isoformat(), app, user, "info", msg, mentioned=mentioned)


def purge(platform: Platform, app: str, user: str) -> int:
    _segments, lines = platform.logs.purge_user(app, user, subject_key(platform.config.subject_secret, app, user))
    return lines


# ----- item 1: free text is never identity --------------------------------------------------------------


def test_a_number_in_another_users_text_is_not_the_user(platform: Platform) -> None:
    app, ts = "logid-num", window()
    key = platform.logs.ship(
        [
            line(ts, app, "12345", "login ok"),
            line(ts, app, "carol@example.org", "order 12345 shipped"),
            line(ts, app, None, "batch 12345 done"),
        ],
        ts,
        shard=1,
    )
    before = raw_lines(platform, key)
    assert purge(platform, app, "12345") == 1
    assert raw_lines(platform, key) == before[1:]  # the other lines, byte for byte


def test_a_mention_in_another_app_is_not_the_user(platform: Platform) -> None:
    ts, alice = window(), "alice@example.org"
    key = platform.logs.ship(
        [
            line(ts, "logid-a", alice, "login ok"),
            line(ts, "logid-b", "dave@example.org", f"forwarded the ticket to {alice}", mentioned=(alice,)),
            line(ts, "logid-a", "erin@example.org", "hello"),
        ],
        ts,
        shard=2,
    )
    before = raw_lines(platform, key)
    assert purge(platform, "logid-a", alice) == 1
    assert raw_lines(platform, key) == before[1:]
    secret = platform.config.subject_secret
    assert platform.logs.segments_of(subject_key(secret, "logid-b", alice)) == [key]  # app b's index row stays


# ----- item 3: mention-only lines go with the user ------------------------------------------------------


def test_mention_only_lines_go_with_the_user_and_their_index_row_last(platform: Platform) -> None:
    app, ts = "logid-mention", window()
    key = platform.logs.ship(
        [
            line(ts, app, "bob", "turn completed"),
            line(ts, app, None, "rate limit reached for bob", mentioned=("bob",)),
            line(ts, app, "carol", "carol and bob share a ticket", mentioned=("bob",)),
            line(ts, app, "carol", "bob is mentioned only in free text"),
            line(ts, app, "bobby", "rate limit reached for bobby"),
        ],
        ts,
        shard=3,
    )
    before = raw_lines(platform, key)
    sk = subject_key(platform.config.subject_secret, app, "bob")
    assert platform.logs.segments_of(sk) == [key]
    assert purge(platform, app, "bob") == 3
    assert raw_lines(platform, key) == before[3:]
    assert platform.logs.segments_of(sk) == []
    assert purge(platform, app, "bob") == 0  # idempotent
    assert raw_lines(platform, key) == before[3:]


# ----- item 10: malformed data in someone else's lines --------------------------------------------------

MALFORMED = [
    b"this is not json\n",
    b"\xff\xfe not utf-8 \xc3\n",
    b"[1, 2, 3]\n",
    b'{"app":"%s","user_id":42,"msg":"a number as user id"}\n',
    b'{"app":"%s","user_id":"","msg":"empty user id"}\n',
    b'{"app":"%s","user_id":"\\ud800","msg":"lone surrogate"}\n',
    b'{"app":"%s","user_id":"' + b"x" * 300 + b'","msg":"too long"}\n',
    b'{"app":"%s","user_id":null,"mentions":"not a list","msg":"bad mentions"}\n',
]


def malformed(app: str) -> list[bytes]:
    return [m.replace(b"%s", app.encode()) for m in MALFORMED]


def test_malformed_lines_are_kept_byte_identical_and_never_block_a_purge(platform: Platform) -> None:
    app, ts = "logid-bad", window()
    target, other = "target@example.org", "other@example.org"
    key = platform.logs.ship(
        [line(ts, app, target, "mine"), line(ts, app, other, "theirs"), line(ts, app, None, "x", mentioned=(target,))],
        ts,
        shard=4,
    )
    good = raw_lines(platform, key)
    put_raw(platform, key, [good[0], *malformed(app), good[1], good[2]])
    assert purge(platform, app, target) == 2
    assert raw_lines(platform, key) == [*malformed(app), good[1]]
    assert purge(platform, app, target) == 0


# ----- the saga and the verifier ------------------------------------------------------------------------


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


def logs_check(result: VerifyResult) -> Any:
    return next(c for c in result.checks if c.check == "logs")


@pytest.mark.asyncio(loop_scope="session")
async def test_another_users_line_naming_the_id_fails_no_verification(saga: SagaHarness) -> None:
    """The recent-segment scan is structural: 'order 12345 shipped' of another user is not a leftover."""
    app = "logid-verify"
    await saga.seed(app, ["12345", "frank@example.org"], "small", 91)
    ts = window(2099)  # among the most recent segments, which the verifier samples
    key = saga.platform.logs.ship([line(ts, app, "frank@example.org", "order 12345 shipped")], ts, shard=5)
    before = raw_lines(saga.platform, key)
    result = await saga.erase(app, "12345")
    assert result.status == "completed"
    assert raw_lines(saga.platform, key) == before


@pytest.mark.asyncio(loop_scope="session")
async def test_verifier_fails_when_a_mention_only_line_remains(saga: SagaHarness) -> None:
    app = "logid-vmention"
    await saga.seed(app, ["bob", "grace@example.org"], "small", 92)
    sk = subject_key(saga.platform.config.subject_secret, app, "bob")
    key = saga.platform.logs.segments_of(sk)[0]
    result = await saga.erase(app, "bob")
    assert result.status == "completed"
    assert saga.platform.logs.lines_of(sk, app, [key]) == []  # the seeder's (sealed) mention lines went too
    assert (await reverify(saga, result.request_id)).passed
    # an eraser that missed a mention-only line, plain (shipped before sealing) or sealed: the verifier sees both
    left = {"ts": "t", "level": "warning", "app": app, "user_id": None, "msg": "rate limit for bob", "mentions": [sk]}
    sealed = {"ts": "t", "level": "warning", "app": app, "mentions": [sk], "lid": "0" * 16, "sealed": "AAAA"}
    planted = [json.dumps(r).encode() + b"\n" for r in (left, sealed)]
    put_raw(saga.platform, key, [*raw_lines(saga.platform, key), *planted])
    again = await reverify(saga, result.request_id)
    assert not again.passed
    assert logs_check(again).counts["lines_in_named_segments"] == 2


@pytest.mark.asyncio(loop_scope="session")
async def test_malformed_lines_in_a_shared_segment_are_reported_not_blocking(saga: SagaHarness) -> None:
    app = "logid-sagabad"
    users = user_ids(2, 93, prefix="bad")
    target, other = users
    await saga.seed(app, users, "small", 93)
    secret = saga.platform.config.subject_secret
    sk = subject_key(secret, app, target)
    key = saga.platform.logs.segments_of(sk)[0]
    assert key in saga.platform.logs.segments_of(subject_key(secret, app, other))
    assert not any(target.encode() in r for r in raw_lines(saga.platform, key))  # the seeder's lines are sealed
    put_raw(saga.platform, key, [*raw_lines(saga.platform, key), *malformed(app)])
    named = SubjectLines(secret, app, sk)
    others_before = [r for r in raw_lines(saga.platform, key) if named.raw(r) is not Verdict.SUBJECT]
    assert len(others_before) < len(raw_lines(saga.platform, key))

    result = await saga.erase(app, target, wait_seconds=90)
    assert result.status == "completed"
    assert raw_lines(saga.platform, key) == others_before  # the other user's and the malformed lines, as they were
    logs_step = next(s for s in result.steps if s.name == "logs")
    assert logs_step.counts["malformed_lines"] == len(MALFORMED)
    check = logs_check(await reverify(saga, result.request_id))
    assert check.passed
    assert check.counts["malformed_lines"] >= len(MALFORMED)


# ----- item 10: the scheduled sweep goes on past a failing subject --------------------------------------


class FailsFor(LogArchive):
    """A log archive whose index read fails for chosen subjects: one non-retryably, one every attempt."""

    fatal: ClassVar[set[str]] = set()
    flaky: ClassVar[set[str]] = set()

    def segments_of(self, subject: str, window_before: datetime | None = None) -> list[str]:
        if subject in self.fatal:
            raise InvalidIdentifier("planted: this subject can never be swept")
        if subject in self.flaky:
            raise RuntimeError("planted: this subject's sweep keeps failing")
        return super().segments_of(subject, window_before)


@pytest.mark.asyncio(loop_scope="session")
async def test_scheduled_sweep_counts_failing_subjects_and_sweeps_the_rest(saga: SagaHarness) -> None:
    app, secret = "logid-sweep", saga.platform.config.subject_secret
    prefix = f"zzlog{uuid.uuid4().hex[:8]}"
    erased_at = datetime.now(UTC)
    fatal, flaky, clean = (f"sweep-{prefix}-{n}@example.org" for n in ("fatal", "flaky", "clean"))
    subjects = {u: subject_key(secret, app, u) for u in (fatal, flaky, clean)}
    # the clean subject: a late line before its erasure, in a segment with others' malformed lines
    ts = erased_at - timedelta(hours=2)
    key = saga.platform.logs.ship(
        [line(ts, app, clean, "late write"), line(ts, app, "henry@example.org", "kept")], ts, shard=6
    )
    kept = raw_lines(saga.platform, key)[1:]
    put_raw(saga.platform, key, [*raw_lines(saga.platform, key), *malformed(app)])
    with saga.platform.pool.connection() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO erasure_ledger (request_id, subject_key, app_name, erased_at) VALUES (%s, %s, %s, %s)",
            [(f"{prefix}-{n}", subjects[u], app, erased_at) for n, u in enumerate((fatal, flaky, clean))],
        )
    saga.platform.requests.create(  # the clean subject's request, where the sweep notes what it found
        request_id=f"{prefix}-2",
        subject_key=subjects[clean],
        app_name=app,
        user_id=clean,
        received_at=erased_at,
        due_at=erased_at,
        requested_by=None,
        reason=None,
    )
    FailsFor.fatal, FailsFor.flaky = {subjects[fatal]}, {subjects[flaky]}
    platform = Platform(saga.platform.config)
    context = platform.store_context
    broken = LogsAdapter(context)
    broken.logs = FailsFor(context.s3, context.buckets.logs, context.pool, context.subject_secret, context.keys)
    wired(platform, broken)  # the scheduled sweep reaches the logs through the platform's registry
    queue = f"sweepfail-{uuid.uuid4().hex[:8]}"
    try:
        async with build_worker(saga.client, queue, platform, load_secrets(saga.settings).signing_key):
            result = await asyncio.wait_for(
                saga.client.execute_workflow(
                    SWEEP_WORKFLOW,
                    SweepInput(lookback_hours=1, page_size=10, pages_per_run=2, after_request_id=prefix),
                    id=f"sweepfail-{prefix}",
                    task_queue=queue,
                    result_type=SweepResult,
                ),
                120,
            )
    finally:
        platform.close()
    assert result.subjects == 3
    assert result.failed == 2
    assert result.failed_requests == [f"{prefix}-0", f"{prefix}-1"]
    assert result.subjects_with_findings == [subjects[clean]]
    assert result.malformed_lines == len(MALFORMED)
    assert raw_lines(saga.platform, key) == [*kept, *malformed(app)]
