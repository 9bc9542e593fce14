"""The physical clean-up's books (issue 30): which finished requests the platform job still owes a physical
pass, by when, and what its runs covered.

A request's deletions done (an erasure's receipt issued, a destructive forget's receipt issued), it is filed
here with ``deleted_by`` (the database clock then: every deletion of the request had landed) and ``due_at``
(``deleted_by`` + the platform's window). The job (``stores.physical.job``) reads the open rows oldest first
through a partial index, covers them, and marks them attested; the window watch counts the open rows past
``due_at`` through the other. Request ids, times and counts only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

Kind = Literal["erasure", "forget"]


@dataclass(frozen=True)
class Pending:
    request_id: str
    kind: str
    deleted_by: datetime
    due_at: datetime


@dataclass(frozen=True)
class PhysicalStatus:
    """What a request's physical clean-up stands at: ``pending`` (owed by ``due_at``) or ``done``."""

    state: Literal["pending", "done"]
    due_at: datetime
    attested_at: datetime | None
    run_id: str | None


def file_pending(pool: ConnectionPool, request_id: str, kind: Kind, window: timedelta) -> datetime:
    """File the request as owed a physical pass (idempotent: a retry keeps the first filing); its due time."""
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO physical_pending (request_id, kind, deleted_by, due_at) "
            "VALUES (%s, %s, clock_timestamp(), clock_timestamp() + %s) ON CONFLICT (request_id) DO NOTHING",
            (request_id, kind, window),
        )
        row = conn.execute("SELECT due_at FROM physical_pending WHERE request_id = %s", (request_id,)).fetchone()
    assert row is not None
    due: datetime = row[0]
    return due


def status(pool: ConnectionPool, request_id: str) -> PhysicalStatus | None:
    """The request's physical state; ``None`` for a request never filed (it ended before the job existed,
    its plan ran the clean-up itself, or it deleted nothing)."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT due_at, attested_at, run_id FROM physical_pending WHERE request_id = %s", (request_id,)
        ).fetchone()
    if row is None:
        return None
    return PhysicalStatus("done" if row[1] is not None else "pending", row[0], row[1], row[2])


def open_before(pool: ConnectionPool, before: datetime, limit: int) -> list[Pending]:
    """The open rows whose deletions had landed before ``before`` (a run's baseline), oldest first."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT request_id, kind, deleted_by, due_at FROM physical_pending "
            "WHERE attested_at IS NULL AND deleted_by < %s ORDER BY deleted_by LIMIT %s",
            (before, limit),
        ).fetchall()
    return [Pending(r[0], r[1], r[2], r[3]) for r in rows]


def open_of(pool: ConnectionPool, request_ids: list[str]) -> list[Pending]:
    """The open rows among ``request_ids`` (by primary key)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT request_id, kind, deleted_by, due_at FROM physical_pending "
            "WHERE request_id = ANY(%s) AND attested_at IS NULL",
            (request_ids,),
        ).fetchall()
    return [Pending(r[0], r[1], r[2], r[3]) for r in rows]


def overdue(pool: ConnectionPool, limit: int = 100) -> tuple[int, list[str]]:
    """The open rows past their deadline: how many, and the first ``limit`` request ids (oldest due first)."""
    with pool.connection() as conn:
        count = conn.execute(
            "SELECT count(*) FROM physical_pending WHERE attested_at IS NULL AND due_at < clock_timestamp()"
        ).fetchone()
        rows = conn.execute(
            "SELECT request_id FROM physical_pending WHERE attested_at IS NULL AND due_at < clock_timestamp() "
            "ORDER BY due_at LIMIT %s",
            (limit,),
        ).fetchall()
    return (int(count[0]) if count else 0), [r[0] for r in rows]


def open_count(pool: ConnectionPool) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM physical_pending WHERE attested_at IS NULL").fetchone()
    return int(row[0]) if row else 0


def mark_attested(pool: ConnectionPool, request_id: str, run_id: str) -> None:
    with pool.connection() as conn:
        conn.execute(
            "UPDATE physical_pending SET attested_at = clock_timestamp(), run_id = %s "
            "WHERE request_id = %s AND attested_at IS NULL",
            (run_id, request_id),
        )


def begin_run(pool: ConnectionPool, run_id: str) -> datetime:
    """Record a run's start (idempotent: a retried begin keeps the first start); the start, the run's bound."""
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO physical_runs (run_id, started_at) VALUES (%s, clock_timestamp()) "
            "ON CONFLICT (run_id) DO NOTHING",
            (run_id,),
        )
        row = conn.execute("SELECT started_at FROM physical_runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    started: datetime = row[0]
    return started


def finish_run(pool: ConnectionPool, run_id: str, requests: int, covered: int, counts: dict[str, int]) -> None:
    with pool.connection() as conn:
        conn.execute(
            "UPDATE physical_runs SET finished_at = clock_timestamp(), requests = %s, covered = %s, counts = %s "
            "WHERE run_id = %s",
            (requests, covered, Jsonb(counts), run_id),
        )
