"""The physical clean-up step: vacuum the tables the deleting steps touched, so dead tuples' space is freed.

A deleted row stays on disk as a dead tuple (and as entries in every index of its table, pgvector's and the
GIN provenance indexes included) until VACUUM removes it; only then can its space be reused. This step runs
after the deleting steps: ``VACUUM (INDEX_CLEANUP ON)`` on every table a registered store names, one at a
time, with a heartbeat between them. The tables come from the stores' adapters, never from a list here: each
adapter's ``vacuum_tables()`` (``VacuumTables``), else the tables it ``claims()``; the registry hands the
vacuum its peers (``see_peers``). So google-adk's tables (the sessions adapter), the memory table (the
memory adapter) and a table of a store added as a package are vacuumed alike; the keys store names none
(the physical job rewrites ``data_keys`` whole, ``KeyEpochs.compact``), nor the logs store (its subject
index holds keys and segment names only, no content). Plain VACUUM takes a lock that never blocks reads or
writes of the platform (SHARE UPDATE EXCLUSIVE). ``INDEX_CLEANUP ON`` makes it clean the indexes even when
few tuples died (PostgreSQL otherwise skips them, and the index entries, which hold the lookup columns,
stay). Concurrent erasures share vacuums: a vacuum that started after a request's deletions covers it.

What it does not reach, and what the receipt says so: WAL segments already written and every backup keep the
old tuples; what those hold of the user is sealed under the user's data key (destroyed by the keys step),
apart from the lookup columns. VACUUM leaves freed bytes in the page until they are overwritten. Its cost
follows the tables' size, not the user's rows: it is the one step that does not; it is the platform's regular
maintenance done sooner, and shared by the erasures that finish while one runs.

Idempotent: a retry finds its tables covered (or vacuums again, harmlessly) and records the same rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg import Connection, sql

from stores.adapters.interface import (
    Beat,
    Bound,
    Claims,
    Coverage,
    Disposition,
    EraseAdapter,
    Remaining,
    Subject,
    Swept,
    VacuumTables,
)
from stores.physical import evidence, statements
from stores.physical.cleanup import CleanupBooks, covered_targets, found_any
from stores.physical.statements import StoreStatement

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

#: the built-in stores' tables (the sessions and memory adapters' ``vacuum_tables()``): what a platform with
#: only the built-in stores vacuums, and the wording's fallback when no evidence names the tables. The vacuum
#: itself never reads it: it asks the registered adapters (``tables_by_store``)
TABLES = ("events", "sessions", "user_states", "memories")
#: the built-in google-adk tables' and memory table's wording in the attestation
_SESSION_TABLES = ("events", "sessions", "user_states")
_NAME = re.compile(r"^[a-z_][a-z0-9_$]{0,62}(\.[a-z_][a-z0-9_$]{0,62})?$")  # lower case: to_regclass folds it
#: the request's baseline of Postgres's vacuum counters (``physical_evidence``)
BASELINE = evidence.TABLES_BASELINE


class VacuumAdapter:
    name = "vacuum"
    after: tuple[str, ...] = ("sessions", "memory")
    batched = True  # a large table takes a while: heartbeats between tables and while one is vacuumed
    after_sweep = True  # runs once the second sweep is done, so its deletions are covered too
    disposition = Disposition(
        "physically_removed",
        "dead tuples and index entries of the vacuumed tables marked as free space (bytes not overwritten: "
        "they stay in the pages until a later row reuses the space); WAL segments until recycled and database "
        "backups keep the old tuples (user content sealed, key destroyed, except rows a writer left unsealed; "
        "lookup columns in clear)",
    )

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.requests = context.pool, context.requests
        self.books = CleanupBooks(context.pool, "vacuum")
        self._context = context
        self._peers: tuple[EraseAdapter, ...] | None = None  # told by the registry (``see_peers``)

    def see_peers(self, adapters: Sequence[EraseAdapter]) -> None:
        """The registry's adapters: the stores whose tables this vacuums (checked now: a bad name stops the
        worker at start, naming the store)."""
        peers = tuple(a for a in adapters if a is not self)
        tables_by_store(peers)
        self._peers = peers

    def _stores(self) -> tuple[EraseAdapter, ...]:
        """The stores that name tables; built outside a registry (a test's own adapter), the context's."""
        if self._peers is None:
            from stores.adapters.registry import AdapterRegistry

            self.see_peers(AdapterRegistry(self._context).in_order())
        assert self._peers is not None
        named = tables_by_store(self._peers)
        return tuple(a for a in self._peers if a.name in named)

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table a registered store names, once each, in plan order."""
        found = [t for a in self._stores() for t in tables_of(a)]
        return tuple(dict.fromkeys(found))

    def _deleting(self) -> tuple[str, ...]:
        """The stores whose later passes (the sweeps' deletion marks) leave dead tuples in those tables."""
        return tuple(dict.fromkeys([*self.after, *(a.name for a in self._stores())]))

    def locate(self, subject: Subject) -> dict[str, int]:
        return {}  # holds nothing of any user: "found at the start" stays about the user's data

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        """Each table: covered by a vacuum that started after this request's deletions, or vacuumed now.

        The deleting steps (and the second sweep) are done when this runs, so "now" bounds them: Postgres's
        own vacuum counters are read then (the baseline the check compares with). Under a per-table advisory
        lock (waited for with heartbeats, never blocking the platform's own reads and writes), a vacuum this
        step finished that started after that bound covers the request too: concurrent erasures share it. A
        table whose counters do not show a vacuum since the baseline (one of its was running then, and was
        cancelled by ours) is vacuumed once more."""
        tables, deleting = self.tables, self._deleting()
        if not self._deleted_anything(subject):
            for table in tables:  # nothing of this request left a dead tuple: covered as it is
                self.books.record(subject.request_id, table)
            return {"tables_vacuumed": 0, "tables_covered": 0}
        baseline = self._baseline(subject.request_id, tables)
        vacuumed = 0
        for n, table in enumerate(tables):
            vacuumed += self.books.cover(table, baseline.taken_at, subject.request_id, beat, _vacuum(table))
            if not evidence.tables_covered(self.pool, subject.request_id, (table,), deleting).covered:
                self.books.cover(table, self.books.now(), subject.request_id, beat, _vacuum(table))
            beat({"stage": "vacuum", "tables": n + 1})
        return {"tables_vacuumed": vacuumed, "tables_covered": len(tables) - vacuumed}

    def cover_requests(self, request_ids: Sequence[str], beat: Beat) -> dict[str, int]:
        """The physical job's pass (issue 30): Postgres's vacuum counters read once as every request's
        baseline (their deletions have all landed), then each table vacuumed once for all of them (or covered
        by a vacuum that started after the baseline), once more where the counters do not show it."""
        ids = list(request_ids)
        if not ids:
            return {"tables_vacuumed": 0}
        tables, deleting = self.tables, self._deleting()
        with self.pool.connection() as conn:
            taken_at = evidence.clock(conn)
            stats = evidence.table_stats(conn, tables)
        evidence.record_baselines(self.pool, ids, BASELINE, taken_at, evidence.table_items(stats))
        vacuumed = 0
        for n, table in enumerate(tables):
            vacuumed += self.books.cover_many(table, taken_at, ids, beat, _vacuum(table))
            if not evidence.tables_covered(self.pool, ids[0], (table,), deleting).covered:
                vacuumed += self.books.cover_many(table, self.books.now() or taken_at, ids, beat, _vacuum(table))
            beat({"stage": "vacuum", "tables": n + 1})
        return {"tables_vacuumed": vacuumed}

    def coverage(self, request_id: str) -> Coverage:
        """Postgres's own counters against the request's baseline (``physical_evidence``), for every table a
        registered store names now (a table added since the baseline has no counters there: not covered)."""
        tables = self.tables
        with self.pool.connection() as conn:  # read once: judged, and carried as the evidence
            stats = evidence.table_stats(conn, tables)
        kept = evidence.baselines(self.pool, request_id).get(BASELINE)
        deleted_by = evidence.last_deletion(self.pool, request_id, self._deleting())
        judged = evidence.judge_tables(tables, kept, deleted_by, stats)
        return Coverage(
            judged.covered,
            judged.note(),
            {
                "baseline_at": kept.taken_at.isoformat() if kept else None,
                "before": kept.items if kept else {},
                "after": evidence.table_items(stats),
            },
        )

    def statement(self, kind: str, coverage: Coverage, key_unwrappable_by: datetime | None) -> StoreStatement:
        """What the vacuum did to the bytes, in exact words (``stores.physical.statements``): plain VACUUM marks
        the space free and overwrites nothing; the WAL and backups keep every row as written. Rows a writer
        left unsealed (google-adk's plain service, rows not yet re-sealed) keep their content in clear there:
        the job cannot tell from the deleted rows which kind it removed, so both are stated."""
        sealed = statements.sealing(kind)
        named = _evidence_tables(coverage) or (self.tables if getattr(self, "_peers", None) is not None else TABLES)
        rows = "the deleted rows (sealed content, lookup columns, and any unsealed row's content in clear)"
        return StoreStatement(
            self.name,
            f"VACUUM (INDEX_CLEANUP ON) of {', '.join(named)} after the request's last deletion: the deleted rows' "
            "tuples and index entries marked as free space (space freed, bytes not overwritten)",
            _content(named, sealed),
            (
                statements.Copy(statements.HEAP_PAGES, rows, statements.UNTIL_REUSED),
                statements.Copy(statements.TOAST_PAGES, "values stored out of line", statements.UNTIL_REUSED),
                statements.Copy(
                    statements.INDEX_PAGES,
                    "lookup columns (subject key or raw user id, session ids)",
                    statements.UNTIL_REUSED,
                ),
                statements.Copy(statements.WAL, "every row as inserted", statements.UNTIL_RECYCLED),
                statements.Copy(statements.ARCHIVES_AND_BACKUPS, "every row as written", statements.UNTIL_RETENTION),
            ),
            bytes_overwritten=False,
            readable_until=statements.readable_until(kind, key_unwrappable_by),
        )

    def _baseline(self, request_id: str, tables: Sequence[str]) -> evidence.Baseline:
        with self.pool.connection() as conn:
            taken_at = evidence.clock(conn)
            stats = evidence.table_stats(conn, tables)
        return evidence.record_baseline(self.pool, request_id, BASELINE, taken_at, evidence.table_items(stats))

    def _deleted_anything(self, subject: Subject) -> bool:
        """Whether a step of this request whose store names tables, or its second sweep, deleted rows: what
        those stores found at the start (the probe's counts under their ``locate`` keys), the memory rows
        recorded as erased (by the subject key index), or a sweep's deletion mark. A session written past the
        fence after the start and deleted by the step is left to autovacuum."""
        found = [k for a in self._stores() for key in a.locate(subject) for k in (key, f"{a.name}.{key}")]
        if found_any(self.requests.record(subject.request_id), found):
            return True
        if evidence.last_deletion(self.pool, subject.request_id, self._deleting()) is not None:
            return True
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM erased_memories WHERE subject_key = %s AND request_id = %s LIMIT 1",
                (subject.subject_key, subject.request_id),
            ).fetchone()
        return row is not None

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        """Postgres's own evidence, not this step's books: each table's vacuum counters show a vacuum that
        started after the request's last deletion (the second sweep's included). A request that deleted
        nothing is covered once its step ran; one that did and has no evidence fails closed (a request that
        ended before evidence was kept is judged by the books, and the check says so)."""
        request_id, tables = subject.request_id, self.tables
        kept = evidence.baselines(self.pool, request_id).get(BASELINE)
        if not self._deleted_anything(subject):
            return Remaining({"tables_not_vacuumed": len(set(tables) - covered_targets(self.pool, request_id))})
        if kept is None and bound is not None:
            done = covered_targets(self.pool, request_id)
            return Remaining({"tables_not_vacuumed": len(set(tables) - done)}, note=evidence.LEGACY)
        judged = evidence.tables_covered(self.pool, request_id, tables, self._deleting())
        return Remaining({"tables_not_vacuumed": len(judged.not_covered)}, note=judged.note())

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept()  # a sweep deletes little; autovacuum removes what it leaves

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {"counts": {}}  # holds nothing of any user


def tables_of(adapter: object) -> tuple[str, ...]:
    """The Postgres tables one adapter's deletions leave dead tuples in: its ``vacuum_tables()``, else the
    tables it ``claims()`` (a store that keeps user data in a table is vacuumed unless it says otherwise)."""
    if isinstance(adapter, VacuumTables):
        return tuple(adapter.vacuum_tables())
    if isinstance(adapter, Claims):
        return tuple(adapter.claims().tables)
    return ()


def tables_by_store(adapters: Sequence[object]) -> dict[str, tuple[str, ...]]:
    """Each adapter that names tables: its name and its tables; a name that is not a plain (optionally
    schema-qualified) SQL identifier is refused, naming the store (it reaches a VACUUM statement)."""
    out: dict[str, tuple[str, ...]] = {}
    for adapter in adapters:
        tables = tables_of(adapter)
        bad = [t for t in tables if not _NAME.match(t)]
        if bad:
            raise ValueError(f"store {getattr(adapter, 'name', '?')!r} names a table that is not a plain identifier")
        if tables:
            out[str(getattr(adapter, "name", ""))] = tables
    return out


def _evidence_tables(coverage: Coverage) -> tuple[str, ...]:
    """The tables the coverage's evidence carries Postgres's counters of (what the pass judged)."""
    after = coverage.evidence.get("after") or coverage.evidence.get("before") or {}
    return tuple(after) if isinstance(after, dict) else ()


def _content(tables: Sequence[str], sealed: str) -> str:
    """What the vacuumed tables hold, per kind of table: google-adk's, the memory table, a store's own."""
    said = []
    adk = [t for t in _SESSION_TABLES if t in tables]
    if adk:
        said.append(
            f"{', '.join(adk)}: event data and state values written through the sealed session service {sealed}; "
            "rows written unsealed (google-adk's plain service, rows not yet re-sealed) hold their content and "
            "the raw user id in clear"
        )
    if "memories" in tables:
        said.append(f"memories: contents and embeddings {sealed}")
    others = [t for t in tables if t not in (*_SESSION_TABLES, "memories")]
    if others:
        said.append(
            f"{', '.join(others)}: the rows as their stores wrote them (content sealed where the store seals it, "
            "in clear where it does not)"
        )
    said.append("lookup columns (subject key, session and row ids, state keys, timestamps) in clear")
    return "; ".join(said)


def _vacuum(table: str) -> Callable[[Connection[tuple[Any, ...]]], object]:
    name = sql.Identifier(*table.split("."))  # a store's declared name (checked), quoted as an identifier

    def run(conn: Connection[tuple[Any, ...]]) -> object:
        return conn.execute(sql.SQL("VACUUM (INDEX_CLEANUP ON) {}").format(name))

    return run
