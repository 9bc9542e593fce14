"""What the physical clean-up steps (``vacuum``, ``compaction``) share: one run covering concurrent erasures,
heartbeats while a run blocks, and their bookkeeping (migration 0014). The checks do not trust these books
where a request deleted something: they read the store's own evidence (``physical_evidence``).

``table_vacuums`` holds the last run this project finished per *target* (a table, or the object store's
volumes) with when it started; ``physical_cleanup`` holds, per (request, target), when the request was
covered. A run that started after a request's deletions had landed covers that request too: erasures that
finish while one runs share it. The lock per target is a Postgres advisory lock (waited for with
heartbeats); it never touches the platform's own reads and writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.adapters.interface import Beat
from stores.books.request_record import RequestRecord

T = TypeVar("T")
BEAT_EVERY = 2.0  # seconds between heartbeats while a run blocks (the step's heartbeat timeout is 10 s)
LOCK_RETRY_SECONDS = 0.5  # between tries for a run another erasure holds (no connection held meanwhile)


def found_any(record: RequestRecord, keys: Iterable[str]) -> bool:
    """Whether the presence probe at the request's start found any of ``keys`` (adapters' ``locate`` keys)."""
    found = record.found_at_start or {}
    return any(found.get(key, 0) for key in keys)


def while_beating(run: Callable[[], T], beat: Beat, details: dict[str, Any], every: float = BEAT_EVERY) -> T:
    """``run()`` in a thread of its own, heartbeating ``details`` while it blocks; its result or its error.

    A daemon thread: an attempt stopped by worker shutdown (its heartbeat raises) does not wait for it."""
    done = threading.Event()
    out: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            out.append(run())
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, name="cleanup-run", daemon=True).start()
    while not done.wait(every):
        beat(details)
    if failed:
        raise failed[0]
    return out[0]


def covered_targets(pool: ConnectionPool, request_id: str) -> set[str]:
    """The checks' read: the targets recorded as covered for the request."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT table_name FROM physical_cleanup WHERE request_id = %s", (request_id,)).fetchall()
    return {r[0] for r in rows}


class CleanupBooks:
    """Runs shared per target, and the per-request record of what covered each request."""

    def __init__(self, pool: ConnectionPool, stage: str) -> None:
        self.pool = pool
        self.stage = stage  # "vacuum", "compaction": names the advisory locks and the heartbeats

    def now(self) -> datetime | None:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT now()").fetchone()
        return row[0] if row else None

    def record(self, request_id: str, target: str) -> None:
        with self.pool.connection() as conn:
            self._record(conn, request_id, target)

    @staticmethod
    def _record(conn: Connection[tuple[Any, ...]], request_id: str, target: str) -> None:
        conn.execute(
            "INSERT INTO physical_cleanup (request_id, table_name) VALUES (%s, %s) "
            "ON CONFLICT (request_id, table_name) DO UPDATE SET vacuumed_at = now()",
            (request_id, target),
        )

    def record_many(self, request_ids: Sequence[str], target: str) -> None:
        """``target`` covered for every one of ``request_ids`` (the physical job's one run covers them all)."""
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO physical_cleanup (request_id, table_name) SELECT r, %s FROM unnest(%s::text[]) AS r "
                "ON CONFLICT (request_id, table_name) DO UPDATE SET vacuumed_at = now()",
                (target, list(request_ids)),
            )

    def cover_many(
        self,
        target: str,
        landed_by: datetime,
        request_ids: Sequence[str],
        beat: Beat,
        run: Callable[[Connection[tuple[Any, ...]]], object],
    ) -> int:
        """``cover`` for many requests whose deletions had all landed by ``landed_by``: one run (or one that
        started after ``landed_by``) covers each of them. 1 when this call ran ``run``."""
        if not request_ids:
            return 0
        ran = self.cover(target, landed_by, request_ids[0], beat, run)
        self.record_many(request_ids[1:], target)
        return ran

    def cover(
        self,
        target: str,
        landed_by: datetime | None,
        request_id: str,
        beat: Beat,
        run: Callable[[Connection[tuple[Any, ...]]], object],
    ) -> int:
        """1 when this call ran ``run`` for ``target``, 0 when a run that started after ``landed_by`` (the
        time by which the request's deletions had reached the store) covered it; the request recorded either
        way. ``run`` gets the connection holding the lock (autocommit: VACUUM cannot run in a transaction).

        While another erasure's run holds the lock this one waits *without* a connection: each try takes one
        from the pool and gives it back (holding one while waiting starved the pool, and every other step of
        the platform's concurrent erasures with it). A run that started after ``landed_by`` and has finished
        covers the request without the lock."""
        lock = f"erasure.{self.stage}:{target}"
        while True:
            with self.pool.connection() as conn:
                locked, last, now = _try_lock(conn, lock, target)
                covered = landed_by is not None and last is not None and last >= landed_by
                if locked:
                    return self._run_or_share(conn, lock, target, covered, now, request_id, beat, run)
                if covered:  # a run that started after this request's deletions has finished
                    self._record(conn, request_id, target)
                    return 0
            beat({"stage": self.stage, "waiting_for": target})
            time.sleep(LOCK_RETRY_SECONDS)

    def _run_or_share(
        self,
        conn: Connection[tuple[Any, ...]],
        lock: str,
        target: str,
        covered: bool,
        started: datetime,
        request_id: str,
        beat: Beat,
        run: Callable[[Connection[tuple[Any, ...]]], object],
    ) -> int:
        """Under the lock: run unless ``covered``; then one statement records the run and the request and
        releases the lock (released apart when the run or that statement fails)."""
        try:
            if not covered:
                while_beating(lambda: run(conn), beat, {"stage": self.stage, "running": target})
            self._record_and_unlock(conn, lock, target, None if covered else started, request_id)
        except BaseException:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
            raise
        return 0 if covered else 1

    @staticmethod
    def _record_and_unlock(
        conn: Connection[tuple[Any, ...]], lock: str, target: str, ran_from: datetime | None, request_id: str
    ) -> None:
        """The run that started at ``ran_from`` (None: no run) and the request covered, in one statement (all
        of it or none), committed; only then the lock released, so whoever takes it next finds the run.
        (One statement for both let Postgres release the lock first: a data-modifying CTE the main query does
        not read runs at the statement's end, and another erasure took the lock, read the old record and ran
        again.) An unlock that fails here is done by the caller's handler, or by the session's end."""
        conn.execute(
            "WITH ran AS (INSERT INTO table_vacuums (table_name, started_at, finished_at) "
            "SELECT %(t)s, %(started)s, clock_timestamp() WHERE %(ran)s ON CONFLICT (table_name) DO UPDATE "
            "SET started_at = excluded.started_at, finished_at = excluded.finished_at) "
            "INSERT INTO physical_cleanup (request_id, table_name) VALUES (%(r)s, %(t)s) "
            "ON CONFLICT (request_id, table_name) DO UPDATE SET vacuumed_at = now()",
            {"t": target, "started": ran_from, "ran": ran_from is not None, "r": request_id},
        )  # the pool's connections autocommit: committed here
        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))


def _try_lock(conn: Connection[tuple[Any, ...]], lock: str, target: str) -> tuple[bool, datetime | None, datetime]:
    """(got the lock, when the last finished run of ``target`` started, the clock when the lock was tried).

    The last run is read in a statement of its own, after the lock was tried: read in the same statement, its
    snapshot predates the lock and can miss the run whose record was committed just before the lock came free.
    """
    row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0)), clock_timestamp()", (lock,)).fetchone()
    assert row is not None
    last = conn.execute("SELECT started_at FROM table_vacuums WHERE table_name = %s", (target,)).fetchone()
    return bool(row[0]), last[0] if last else None, row[1]
