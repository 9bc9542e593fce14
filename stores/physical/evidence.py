"""Physical clean-up judged by the store's own evidence, not by this project's books (issue 28).

The ``vacuum`` and ``compaction`` steps record what they did (``stores.physical.cleanup``); a step that records
coverage without doing the work leaves its books right and the files wrong. So their checks read the
stores themselves:

- **Postgres**: each table's vacuum counters (``pg_stat_user_tables``: ``vacuum_count`` +
  ``autovacuum_count``, ``last_vacuum`` / ``last_autovacuum``) and the vacuums running
  (``pg_stat_progress_vacuum``). The step reads them once the request's deletions have committed (the
  *baseline*). A table is covered when its counters show a vacuum that *started* after the baseline: one
  more than the baseline's count, or two more when a vacuum of it was already running then (vacuums of one
  table never overlap: the one running finishes first, the next one started after the baseline).
- **SeaweedFS**: each volume that held garbage once the request's deletions had reached the volumes (the
  filer's queue drained), with its compaction revision, read from the volume servers' ``/status``. A volume
  is covered when its revision has moved on since (SeaweedFS bumps it when a compaction commits). A
  read-only volume whose revision has not moved was not compacted, and is never counted as compacted (issue
  39): it keeps the deleted bytes, and the request stays unattested until it is compacted.

A later deleting pass (the second sweep) records by when it deleted something in each store
(``deletion_marks``): a baseline taken before that mark covers nothing it deleted, so the check fails
until a physical pass after it. A request whose deleting steps removed something and that has no baseline
fails closed.

The functions here take the evidence and the request and return a :class:`Judgement`; the steps' checks and
(issue 30) a platform job covering many requests use them alike.

What the counters cannot show: a vacuum that ran while an older transaction held the horizon back leaves
the dead tuples and still counts; a compaction already copying a volume when the deletion landed commits a
new revision that may keep the needle's bytes. Nor does "covered" mean the bytes are gone: a vacuum marks
the space free and overwrites nothing, and the WAL keeps every row until its segment is recycled; what
remains where is each store's statement (``stores.physical.statements``). The raw-file tests
(``tests/integration/test_physical_evidence.py``, ``test_physical_claims.py``) show the check, the
statements and the files agree on the local stack.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.infra.seaweedfs import Volume

#: the baselines' targets: Postgres's tables (one baseline for all of them), the object store's volumes
TABLES_BASELINE = "postgres_tables"
VOLUMES_BASELINE = "object_store"
#: the check's note for a request that ended before this evidence was kept: judged by the step's books
LEGACY = "ended before the store's evidence was kept: judged by the step's books"


@dataclass(frozen=True)
class TableStats:
    """Postgres's own record of one table's vacuums."""

    table: str
    vacuums: int  # vacuum_count + autovacuum_count
    running: bool  # a vacuum of it was in progress when read (or progress could not be seen)
    last: datetime | None  # greatest(last_vacuum, last_autovacuum): when the latest one finished


@dataclass(frozen=True)
class Baseline:
    """The store's state read by a physical step once the request's deletions had landed."""

    target: str
    taken_at: datetime
    items: dict[str, Any]


@dataclass(frozen=True)
class Judgement:
    """Per target (table, or volume ``node/id``): ``None`` when covered, else why not (PII-free)."""

    not_covered: dict[str, str] = field(default_factory=dict)
    #: of ``not_covered``, the read-only volumes (SeaweedFS never compacts those on a sweep): not compacted, so
    #: not covered; listed apart so the note and the counts can say why
    read_only: tuple[str, ...] = ()

    @property
    def covered(self) -> bool:
        return not self.not_covered

    def note(self) -> str:
        return "; ".join(f"{k}: {why}" for k, why in sorted(self.not_covered.items()))

    def receipt_note(self) -> str:
        """``note`` without the volume servers' addresses (``host:port/id`` reads ``volume id``): what a
        receipt, which the data subject's requester reads, may carry. Tables keep their names."""
        return "; ".join(
            f"volume {k.rsplit('/', 1)[1]}: {why}" if "/" in k else f"{k}: {why}"
            for k, why in sorted(self.not_covered.items())
        )


# ----- reading the stores -------------------------------------------------------------------------------


def table_stats(conn: Connection[tuple[Any, ...]], tables: Sequence[str]) -> dict[str, TableStats]:
    """Each table's vacuum counters and whether a vacuum of it is running, as Postgres reports them.

    Running vacuums are read first, the counters after (a vacuum reports its count before it leaves the
    progress view): a vacuum running when this started is either flagged running or already counted. A
    progress row whose table this role may not see (an autovacuum, without ``pg_read_all_stats``) flags
    every table running: the check then asks for one vacuum more, never one fewer."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    progress = conn.execute(
        "SELECT c.relname, p.relid IS NULL FROM pg_stat_progress_vacuum p "
        "LEFT JOIN pg_class c ON c.oid = p.relid WHERE p.datname = current_database()"
    ).fetchall()
    unseen = any(r[1] for r in progress)
    running = {r[0] for r in progress if r[0] is not None}
    rows = conn.execute(
        "SELECT t, s.vacuum_count + s.autovacuum_count, greatest(s.last_vacuum, s.last_autovacuum) "
        "FROM unnest(%s::text[]) AS t JOIN pg_stat_user_tables s ON s.relid = to_regclass(t)",
        (list(tables),),
    ).fetchall()
    return {r[0]: TableStats(r[0], int(r[1]), unseen or r[0] in running, r[2]) for r in rows}


def clock(conn: Connection[tuple[Any, ...]]) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def table_items(stats: Mapping[str, TableStats]) -> dict[str, Any]:
    return {t: {"vacuums": s.vacuums, "running": s.running} for t, s in stats.items()}


def volume_items(volumes: Mapping[tuple[str, int], Volume]) -> dict[str, Any]:
    """The volumes holding garbage (the deleted needles among them), with their compaction revision."""
    return {
        f"{v.node}/{v.id}": {"revision": v.compact_revision, "read_only": v.read_only}
        for v in volumes.values()
        if v.holds_garbage
    }


# ----- the books of evidence ----------------------------------------------------------------------------


def record_baseline(
    pool: ConnectionPool, request_id: str, target: str, taken_at: datetime, items: dict[str, Any]
) -> Baseline:
    """Keep the request's baseline for ``target``: an existing one taken after every deletion mark stays
    (a retried step must not replace it with one read after its own vacuum or compaction); else this one."""
    with pool.connection() as conn:
        row = conn.execute(
            "INSERT INTO physical_baselines AS b (request_id, target, taken_at, items) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (request_id, target) DO UPDATE SET taken_at = excluded.taken_at, items = excluded.items "
            "WHERE b.taken_at < (SELECT max(deleted_by) FROM deletion_marks m WHERE m.request_id = b.request_id) "
            "RETURNING taken_at, items",
            (request_id, target, taken_at, Jsonb(items)),
        ).fetchone()
        if row is None:  # kept the existing one
            row = conn.execute(
                "SELECT taken_at, items FROM physical_baselines WHERE request_id = %s AND target = %s",
                (request_id, target),
            ).fetchone()
    assert row is not None
    return Baseline(target, row[0], dict(row[1]))


def record_baselines(
    pool: ConnectionPool, request_ids: Sequence[str], target: str, taken_at: datetime, items: dict[str, Any]
) -> None:
    """``record_baseline`` for many requests at once (the physical job's one read covers all of them); a
    request's existing baseline taken after its every deletion mark stays, as there."""
    if not request_ids:
        return
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO physical_baselines AS b (request_id, target, taken_at, items) "
            "SELECT r, %s, %s, %s FROM unnest(%s::text[]) AS r "
            "ON CONFLICT (request_id, target) DO UPDATE SET taken_at = excluded.taken_at, items = excluded.items "
            "WHERE b.taken_at < (SELECT max(deleted_by) FROM deletion_marks m WHERE m.request_id = b.request_id)",
            (target, taken_at, Jsonb(items), list(request_ids)),
        )


def baselines(pool: ConnectionPool, request_id: str) -> dict[str, Baseline]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT target, taken_at, items FROM physical_baselines WHERE request_id = %s", (request_id,)
        ).fetchall()
    return {r[0]: Baseline(r[0], r[1], dict(r[2])) for r in rows}


def mark_deleted(pool: ConnectionPool, request_id: str, stores: Iterable[str]) -> None:
    """A deleting pass of the request (the second sweep) deleted something in ``stores``: by now."""
    names = sorted(set(stores))
    if not names:
        return
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO deletion_marks AS m (request_id, store, deleted_by) "
            "SELECT %s, s, clock_timestamp() FROM unnest(%s::text[]) AS s "
            "ON CONFLICT (request_id, store) DO UPDATE SET deleted_by = greatest(m.deleted_by, excluded.deleted_by)",
            (request_id, names),
        )


def last_deletion(pool: ConnectionPool, request_id: str, stores: Iterable[str]) -> datetime | None:
    """By when the later passes had deleted something of the request in any of ``stores`` (None: never)."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT max(deleted_by) FROM deletion_marks WHERE request_id = %s AND store = ANY(%s)",
            (request_id, sorted(set(stores))),
        ).fetchone()
    return row[0] if row else None


# ----- the judgements -----------------------------------------------------------------------------------


def judge_tables(
    tables: Sequence[str], baseline: Baseline | None, deleted_by: datetime | None, now: Mapping[str, TableStats]
) -> Judgement:
    """Whether Postgres shows, for each table, a vacuum that started after the request's deletions."""
    if baseline is None:
        return Judgement({t: "no evidence read after the deletions" for t in tables})
    if deleted_by is not None and deleted_by > baseline.taken_at:
        return Judgement({t: "deleted again after the evidence was read" for t in tables})
    out: dict[str, str] = {}
    for t in tables:
        was = baseline.items.get(t)
        cur = now.get(t)
        if not isinstance(was, dict) or cur is None:
            out[t] = "no statistics"
            continue
        needed = int(was["vacuums"]) + (2 if was.get("running") else 1)
        if cur.vacuums < needed:
            out[t] = f"vacuums {cur.vacuums}, {needed} needed"
    return Judgement(out)


def judge_volumes(
    baseline: Baseline | None, deleted_by: datetime | None, now: Mapping[tuple[str, int], Volume]
) -> Judgement:
    """Whether SeaweedFS shows each volume that held garbage after the deletions compacted since."""
    if baseline is None:
        return Judgement({"object_store": "no evidence read after the deletions"})
    if deleted_by is not None and deleted_by > baseline.taken_at:
        return Judgement({"object_store": "deleted again after the evidence was read"})
    out: dict[str, str] = {}
    read_only: list[str] = []
    for key, was in sorted(baseline.items.items()):
        node, _, vid = key.rpartition("/")
        cur = now.get((node, int(vid)))
        if cur is None:
            out[key] = "volume not found"
        elif cur.compact_revision == int(was["revision"]):
            if was.get("read_only") or cur.read_only:  # never compacted on a sweep: never counted as compacted
                read_only.append(key)
                out[key] = "read-only, not compacted since (SeaweedFS compacts no read-only volume)"
            else:
                out[key] = "not compacted since"
    return Judgement(out, tuple(read_only))


# ----- per request, for the steps' checks and a platform job alike ---------------------------------------


def tables_covered(pool: ConnectionPool, request_id: str, tables: Sequence[str], stores: Iterable[str]) -> Judgement:
    """Whether Postgres shows a vacuum of each of ``tables`` since the request's deletions (its baseline, and
    the marks of later passes in ``stores``, the stores whose deletions leave dead tuples in those tables)."""
    with pool.connection() as conn:
        now = table_stats(conn, tables)
    kept = baselines(pool, request_id).get(TABLES_BASELINE)
    return judge_tables(tables, kept, last_deletion(pool, request_id, stores), now)


def volumes_covered(
    pool: ConnectionPool, request_id: str, now: Mapping[tuple[str, int], Volume], stores: Iterable[str]
) -> Judgement:
    """Whether SeaweedFS (``now``: every volume server's status) shows each volume that held garbage after
    the request's deletions (its baseline, and the marks of later passes in ``stores``) compacted since."""
    kept = baselines(pool, request_id).get(VOLUMES_BASELINE)
    return judge_volumes(kept, last_deletion(pool, request_id, stores), now)
