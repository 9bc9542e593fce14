"""Shared physical clean-up runs (``stores.physical.cleanup``) under concurrency: erasures waiting for a run
another erasure holds must not hold the database pool while they wait. With 20 concurrent erasures and a
pool of 8, waiters holding connections starved every other step (its activities failed with "database
unavailable" and were retried with backoff: a compaction step of 19 s at the median)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from stores.physical.cleanup import CleanupBooks, covered_targets
from stores.platform import Platform

pytestmark = [pytest.mark.integration]

WAITERS = 3


def test_erasures_waiting_for_a_shared_run_leave_the_pool_free_and_are_covered_by_it(platform: Platform) -> None:
    pool = ConnectionPool(platform.config.postgres_url, min_size=1, max_size=2, kwargs={"autocommit": True})
    try:
        books = CleanupBooks(pool, "books-test")
        target = "books_test_target"
        landed_by = books.now()  # every request's deletions had landed before the run below starts
        running, release = threading.Event(), threading.Event()
        waiting = threading.Barrier(WAITERS + 1)
        ran: dict[str, int] = {}
        errors: list[BaseException] = []

        def holder() -> None:
            def run(_conn: Any) -> None:
                running.set()
                release.wait(timeout=60)

            try:
                ran["holder"] = books.cover(target, landed_by, "req-holder", lambda _d: None, run)
            except BaseException as exc:
                errors.append(exc)

        def waiter(name: str) -> None:
            told: list[bool] = []

            def beat(details: dict[str, Any]) -> None:
                if details.get("waiting_for") == target and not told:
                    told.append(True)
                    waiting.wait(timeout=30)

            try:
                ran[name] = books.cover(target, landed_by, name, beat, lambda _c: errors.append(AssertionError(name)))
            except BaseException as exc:
                errors.append(exc)

        first = threading.Thread(target=holder)
        first.start()
        assert running.wait(timeout=30)
        threads = [threading.Thread(target=waiter, args=(f"req-waiter-{i}",)) for i in range(WAITERS)]
        for t in threads:
            t.start()
        try:
            waiting.wait(timeout=30)  # every waiter has found the run held and waits for it
            with pool.connection(timeout=2.0) as conn:  # the pool still serves the platform's other steps
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            release.set()
            for t in [first, *threads]:
                t.join(timeout=60)
        assert not errors
        assert ran == {"holder": 1, **{f"req-waiter-{i}": 0 for i in range(WAITERS)}}  # one run, shared
        for name in ran:
            request = "req-holder" if name == "holder" else name
            assert target in covered_targets(pool, request)
    finally:
        with pool.connection() as conn:
            conn.execute("DELETE FROM physical_cleanup WHERE table_name = %s", ("books_test_target",))
            conn.execute("DELETE FROM table_vacuums WHERE table_name = %s", ("books_test_target",))
        pool.close()


def test_a_failed_run_releases_the_lock_records_nothing_and_the_retry_runs_again(platform: Platform) -> None:
    books = CleanupBooks(platform.pool, "books-test")
    target = "books_test_failing"
    try:
        landed_by = books.now()

        def fails(_conn: Any) -> None:
            raise RuntimeError("the store went away")

        with pytest.raises(RuntimeError, match="went away"):
            books.cover(target, landed_by, "req-fails", lambda _d: None, fails)
        assert target not in covered_targets(platform.pool, "req-fails")
        ran: list[bool] = []
        assert books.cover(target, landed_by, "req-fails", lambda _d: None, lambda _c: ran.append(True)) == 1
        assert ran == [True]  # not blocked by a lock left behind, and not counted as covered by the failure
        assert target in covered_targets(platform.pool, "req-fails")
    finally:
        with platform.pool.connection() as conn:
            conn.execute("DELETE FROM physical_cleanup WHERE table_name = %s", (target,))
            conn.execute("DELETE FROM table_vacuums WHERE table_name = %s", (target,))


def test_a_failed_record_releases_the_lock(platform: Platform) -> None:
    """The statement that records the run and releases the lock fails (a request id Postgres refuses): the
    lock is released all the same, or every later erasure would wait for it forever."""
    books = CleanupBooks(platform.pool, "books-test")
    target = "books_test_record_fails"
    lock = f"erasure.books-test:{target}"
    try:
        with pytest.raises(psycopg.DataError):
            books.cover(target, books.now(), "req-\x00-refused", lambda _d: None, lambda _c: None)
        with psycopg.connect(platform.config.postgres_url, autocommit=True) as other:  # not from the pool
            got = other.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (lock,)).fetchone()
            assert got == (True,)
            other.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
    finally:
        with platform.pool.connection() as conn:
            conn.execute("DELETE FROM table_vacuums WHERE table_name = %s", (target,))


def test_a_run_is_recorded_before_its_lock_is_released(platform: Platform) -> None:
    """The run's record and the lock's release were one statement, and Postgres ran the unlock first (a
    data-modifying CTE the main query does not read runs at the statement's end): while the record waited
    (here on a row lock; in the wild, for a moment), another erasure took the free lock, read the old record
    and ran again (``test_vacuum``'s shared-vacuum test counted 6 vacuums for 4 tables once). The lock must
    be released only once the record is committed, so the other erasure finds the run and shares it."""
    books = CleanupBooks(platform.pool, "books-test")
    target = "books_test_record_then_unlock"
    ran: list[str] = []
    errors: list[BaseException] = []
    try:
        landed_by = books.now()
        with platform.pool.connection() as conn:  # an older run of the target: the row a later run updates
            conn.execute(
                "INSERT INTO table_vacuums (table_name, started_at, finished_at) "
                "VALUES (%s, now() - interval '1 day', now() - interval '1 day')",
                (target,),
            )

        def cover(request_id: str) -> None:
            try:
                books.cover(target, landed_by, request_id, lambda _d: None, lambda _c: ran.append(request_id))
            except BaseException as exc:
                errors.append(exc)

        with psycopg.connect(platform.config.postgres_url) as holder:  # the record's row, locked for a while
            holder.execute("SELECT 1 FROM table_vacuums WHERE table_name = %s FOR UPDATE", (target,))
            first = threading.Thread(target=cover, args=("req-first",))
            first.start()
            deadline = time.monotonic() + 30
            while ran != ["req-first"] or _waiting_on_locks(platform) < 1:  # ran, its record waits
                assert time.monotonic() < deadline, "the first run never reached its record"
                time.sleep(0.05)
            second = threading.Thread(target=cover, args=("req-second",))
            second.start()
            time.sleep(1.5)  # three tries of the second erasure (LOCK_RETRY_SECONDS apart)
            assert ran == ["req-first"], "the second erasure took the lock before the first run was recorded"
            holder.rollback()
        for t in (first, second):
            t.join(timeout=30)
        assert not errors
        assert ran == ["req-first"]  # one run, shared
        assert target in covered_targets(platform.pool, "req-second")
    finally:
        with platform.pool.connection() as conn:
            conn.execute("DELETE FROM physical_cleanup WHERE table_name = %s", (target,))
            conn.execute("DELETE FROM table_vacuums WHERE table_name = %s", (target,))


def _waiting_on_locks(platform: Platform) -> int:
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0
