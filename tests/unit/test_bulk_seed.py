"""The bulk seeder's pure parts: a user's plan is replayable, its memory rows are the service's, the recorder
answers the artifact service as S3 would, the benchmark's plan takes the background count."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.plan import Plan
from stores.memory.service import SessionCapture
from stores.privacy.embedding import tokens
from stores.privacy.identity import subject_key
from workers.stack.seeding.bulk_seed import BACKGROUND, SHAPES, _RecordingS3, plan_memories, plan_user

SECRET = b"s" * 32
START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _plan(user: str = "u-1@example.org", seed: int = 3) -> object:
    return plan_user("app", user, subject_key(SECRET, "app", user), BACKGROUND, seed, START)


def test_a_plan_is_replayable_and_dated_before_the_start() -> None:
    a, b = _plan(), _plan()
    assert a == b
    assert _plan(seed=4) != a
    assert _plan("u-2@example.org") != a
    plan = plan_user("app", "u-1@example.org", subject_key(SECRET, "app", "u-1@example.org"), BACKGROUND, 3, START)
    events = [e for s in plan.sessions for e in s.events]
    assert len(plan.sessions) == BACKGROUND.sessions
    assert len(events) == BACKGROUND.sessions * BACKGROUND.events_per_session
    assert all(e.timestamp < START.timestamp() for e in events)
    assert len({e.id for e in events}) == len(events)
    assert plan.user_state == {"preferred_city": plan.sessions[-1].city}
    assert [len(texts) for _f, _s, texts in plan.artifacts] == [BACKGROUND.versions] * BACKGROUND.artifacts


def test_no_two_memory_rows_of_a_user_say_the_same_words() -> None:
    """Else the memory service would reinforce the first row instead of writing the second."""
    for n in range(30):
        user = f"u-{n}@example.org"
        plan = plan_user("app", user, subject_key(SECRET, "app", user), SHAPES["typical"], 1, START)
        rows = plan_memories(plan, SECRET, SessionCapture())
        seen = {(r.kind, " ".join(tokens(r.text))) for r in rows}
        assert len(seen) == len(rows)
        assert {r.kind for r in rows} <= {"episode", "fact"}
        assert all(r.source_sessions or r.kind == "fact" for r in rows)


def test_the_recorder_answers_version_listings_from_its_puts() -> None:
    s3 = _RecordingS3()
    s3.put_object(Bucket="b", Key="a/app/sk/user/f/0", Body=b"x")
    s3.put_object(Bucket="b", Key="a/app/sk/user/f/1", Body=b"y")
    pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket="b", Prefix="a/app/sk/user/f/"))
    assert [c["Key"] for c in pages[0]["Contents"]] == ["a/app/sk/user/f/0", "a/app/sk/user/f/1"]
    assert [p["Key"] for p in s3.take()] == ["a/app/sk/user/f/0", "a/app/sk/user/f/1"]
    assert s3.take() == []


def test_the_benchmark_plan_takes_the_background_count() -> None:
    assert Plan.make(False, None, Path("o")).background_large == 100_000
    assert Plan.make(True, None, Path("o")).background_large == 1_000
    assert Plan.make(True, None, Path("o"), background=5).background_large == 10  # never below phase 1's users
    assert Plan.make(True, None, Path("o"), background=2_500, bulk_keys="kms").bulk_keys == "kms"


def test_the_huge_shape_is_ten_times_large_and_measured_in_full_runs_only_unless_asked() -> None:
    huge, large = SHAPES["huge"], SHAPES["large"]
    assert huge.sessions * huge.events_per_session == 10 * large.sessions * large.events_per_session == 100_000
    assert huge.artifacts * huge.versions == 10 * large.artifacts * large.versions == 10_000
    assert huge.log_segments * huge.lines_per_segment == 10 * large.log_segments * large.lines_per_segment
    assert Plan.make(False, None, Path("o")).huge
    assert not Plan.make(True, None, Path("o")).huge
    assert Plan.make(True, None, Path("o"), huge=True).huge
    assert not Plan.make(False, None, Path("o"), huge=False).huge
