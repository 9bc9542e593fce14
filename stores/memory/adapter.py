"""Adapter for the memory table: the user's rows with their embeddings, and every row derived from them.

Erase follows provenance (``derived_from``, ``source_sessions``) from the user's rows, from every row an
earlier pass erased (``erased_memories``) and from the erased sessions, transitively and whoever the rows
are filed under; the derived ids go in the request record (the receipt lists them for regeneration).
Rows of other owners that carry one of the erased sessions' ids and are not their own (the user's copies,
re-filed with their provenance stripped: ``stores.memory.session_copies``) go with them, in the erase and in
every sweep. Remaining reads on its own: the user's rows, rows that are an erased row again or name one (or
an erased session), other owners' rows carrying an erased session's id, and rows anywhere holding one of the
request's canary word digests.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stores.adapters.common import chunks, digest
from stores.adapters.interface import Beat, Bound, DataClaims, Disposition, Remaining, Subject, Swept
from stores.adapters.tombstone_reads import erased_session_ids
from stores.ledgers.owner_holds import held_among
from stores.memory.eraser import MemoryEraser
from stores.memory.session_copies import ErasedSessions, session_copies
from stores.memory.store import MemoryStore
from stores.privacy.identity import session_ref, subject_key

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord


class MemoryReads:
    """The verifier's queries: subject-key index, primary key, one GIN probe per named id or digest."""

    def __init__(self, context: StoreContext) -> None:
        self._pool = context.pool
        self._secret = context.subject_secret

    def erased_session_ids(self, subject: str, digests: Sequence[str]) -> list[str]:
        return erased_session_ids(self._pool, self._secret, subject, digests)

    def erased_memory_ids(self, subject: str) -> list[uuid.UUID]:
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT memory_id FROM erased_memories WHERE subject_key = %s", (subject,))
            return [r[0] for r in rows.fetchall()]

    def own_memory_rows(self, subject: str, before: datetime | None) -> int:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories WHERE subject_key = %(s)s "
                "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                {"s": subject, "b": before},
            ).fetchone()
        return int(row[0]) if row else 0

    def rows_naming(self, subject: str, erased_ids: Sequence[uuid.UUID], session_ids: Sequence[str]) -> tuple[int, int]:
        """(rows anywhere, any user's, that are an erased row again or name an erased row or session of the
        subject in their provenance, their owner not under a legal hold; of those rows, how many belong to
        owners under a legal hold: kept on purpose, reported). One pass of probes for both."""
        hits = self._naming(subject, erased_ids, session_ids)
        with self._pool.connection() as conn:
            held = held_among(conn, list(hits))
        return len(hits - held), len(held)

    def copies_carrying(self, subject: str, app_name: str, session_ids: Sequence[str]) -> tuple[int, int]:
        """(other owners' rows carrying one of the subject's erased session ids that are not their own, their
        owner not under a legal hold; of those rows, how many belong to owners under a hold: kept, reported)."""
        with self._pool.connection() as conn:
            copies = session_copies(conn, subject, ErasedSessions(app_name, session_ids, self._secret))
            held = held_among(conn, copies)
        return len(copies) - len(held), len(held)

    def _naming(self, subject: str, erased_ids: Sequence[uuid.UUID], session_ids: Sequence[str]) -> set[uuid.UUID]:
        """Rows anywhere (any user) that are an erased row again, or whose provenance names an erased row
        or an erased session of the subject: one GIN probe per named id, one primary-key probe per id."""
        hits: set[uuid.UUID] = set()
        refs = [session_ref(subject, s) for s in session_ids]
        with self._pool.connection() as conn:
            for chunk in chunks(list(erased_ids)):
                for (row_id,) in conn.execute(
                    "SELECT id FROM memories WHERE id = ANY(%(ids)s) UNION "
                    "SELECT hit.id FROM unnest(%(ids)s::uuid[]) AS named(id) CROSS JOIN LATERAL "
                    "(SELECT id FROM memories WHERE derived_from @> ARRAY[named.id]) AS hit",
                    {"ids": chunk},
                ).fetchall():
                    hits.add(row_id)
            for chunk in chunks(refs):
                for (row_id,) in conn.execute(
                    "SELECT hit.id FROM unnest(%s::text[]) AS named(ref) CROSS JOIN LATERAL "
                    "(SELECT id FROM memories WHERE source_sessions @> ARRAY[named.ref]) AS hit",
                    (chunk,),
                ).fetchall():
                    hits.add(row_id)
        return hits

    def rows_with_digests(self, digests: Sequence[str], before: datetime | None) -> tuple[int, int]:
        """(rows holding a canary digest, of them rows whose owner is under a legal hold: kept, reported)."""
        if not digests:
            return 0, 0
        with self._pool.connection() as conn:
            hits = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE token_digests && %(d)s::text[] "
                    "AND (%(b)s::timestamptz IS NULL OR created_at < %(b)s)",
                    {"d": list(digests), "b": before},
                ).fetchall()
            ]
            held = held_among(conn, hits)
        return len(hits) - len(held), len(held)


class MemoryAdapter:
    name = "memory"
    after: tuple[str, ...] = ("sessions",)  # provenance is followed through the sessions step's tombstones
    batched = True
    disposition = Disposition(
        "deleted",
        "dead tuples until vacuumed, WAL and database backups keep the rows: content and embeddings sealed, "
        "key destroyed; user id, provenance, lifecycle columns and keyed word digests in clear",
    )

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.secret = context.pool, context.subject_secret
        self.ledger, self.requests = context.ledger, context.requests
        self.memory = MemoryEraser(context.pool)
        self.memory_store = MemoryStore(context.pool, context.keys, context.subject_secret)
        self.reads = MemoryReads(context)

    def _refs(self, subject_key: str) -> list[str]:
        return [session_ref(subject_key, s) for s in self.ledger.sessions_of(subject_key)]

    def _sessions(self, subject: Subject) -> ErasedSessions:
        """The subject's erased sessions (its tombstones), to find its rows re-filed under other owners."""
        return ErasedSessions(subject.app_name, self.ledger.sessions_of(subject.subject_key), self.secret)

    def locate(self, subject: Subject) -> dict[str, int]:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM memories WHERE subject_key = %s LIMIT 1000) m",
                (subject.subject_key,),
            ).fetchone()
        return {"memory_rows": int(row[0]) if row else 0}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        """One transaction (``MemoryEraser.erase_user``): a retry finds the whole closure again; every
        erased id is recorded in ``erased_memories`` in that transaction, the derived ones in the record."""
        beat({"phase": "provenance"})
        result = self.memory.erase_user(
            subject.subject_key,
            self._refs(subject.subject_key),
            request_id=subject.request_id,
            sessions=self._sessions(subject),
        )
        beat({"phase": "deleted", "rows": result.rows, "derived": result.derived})
        self.requests.update_record(
            subject.request_id,
            lambda r: replace(r, derived_removed=sorted(set(r.derived_removed or []) | set(result.derived_ids))),
        )
        held = {"derived_rows_held": result.held} if result.held else {}  # another owner's hold: kept
        copies = {"session_copies": result.copies} if result.copies else {}  # counted apart from derived rows
        return {"rows": result.rows, "derived_rows": result.derived - result.copies, **copies, **held}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        destroyed = record.canaries is None and record.canaries_destroyed  # by finish_request, on purpose
        absent = [
            what
            for what, value in (
                ("the sessions step's list of erased session ids", record.erased_sessions),
                ("the memory step's record of erased rows", record.derived_removed),
                ("the canary digests captured at the start", [] if destroyed else record.canaries),
            )
            if value is None
        ]
        if absent or record.erased_sessions is None:
            return Remaining(missing=tuple(absent))
        sk = subject.subject_key
        before = bound.erased_at if bound else None
        erased_ids = self.reads.erased_memory_ids(sk)
        erased_sessions = self.reads.erased_session_ids(sk, record.erased_sessions)
        naming, held = self.reads.rows_naming(sk, erased_ids, erased_sessions)
        copies, held_copies = self.reads.copies_carrying(sk, subject.app_name, erased_sessions)
        counts = {
            "rows_of_user": self.reads.own_memory_rows(sk, before),
            "rows_naming_erased": naming,
            "rows_of_others_carrying_erased_sessions": copies,
        }
        reported = {"rows_kept_under_owners_hold": held} if held else {}
        if held_copies:
            reported["session_copies_kept_under_owners_hold"] = held_copies
        if record.canaries is not None:
            counts["rows_matching_canaries"], held_canaries = self.reads.rows_with_digests(record.canaries, before)
            if held_canaries:
                reported["canary_rows_kept_under_owners_hold"] = held_canaries
        if record.text_runs is not None:  # the user's text word for word under another owner
            beat({"phase": "verbatim runs"})
            holding = self.memory.holders_of_runs(record.text_runs, sk, self.memory_store)
            new = sorted(holding - {uuid.UUID(i) for i in record.copies_at_start or []})
            started = self.requests.get(subject.request_id).started_at
            with self.pool.connection() as conn:
                held_runs = held_among(conn, new)
                dated: dict[uuid.UUID, datetime] = dict(
                    conn.execute("SELECT id, created_at FROM memories WHERE id = ANY(%s)", (new,)).fetchall()
                )
            # dated before the request began yet not found then: the user's text moved under another owner
            moved = [i for i in new if i not in held_runs and (started is None or dated.get(i, started) < started)]
            counts["rows_holding_user_text"] = len(moved)
            later = len(new) - len(moved) - len(held_runs)
            if later:  # another subject wrote the user's words after the request began: theirs, disclosed
                reported["copies_written_after_start"] = later
            if held_runs:
                reported["text_rows_kept_under_owners_hold"] = len(held_runs)
        if record.copies_at_start:  # copies made before the request: another subject's rows, kept, disclosed
            reported["copies_under_other_subjects"] = len(record.copies_at_start)
        # a re-verification after completion: said, never silently skipped
        scans = "canary digests destroyed at completion, canary scan not run (nor the verbatim-run scan)"
        note = scans if destroyed else ""
        return Remaining(counts, reported=reported, note=note)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        sk = subject.subject_key
        memory = self.memory.erase_user(
            sk, self._refs(sk), created_before=before, request_id=subject.request_id, sessions=self._sessions(subject)
        )
        held = {"derived_rows_held": memory.held} if memory.held else {}
        copies = {"session_copies": memory.copies} if memory.copies else {}  # counted apart from derived rows
        found = {"memory_rows": memory.rows, "derived_rows": memory.derived - memory.copies, **copies}
        return Swept(found, reported=held)

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        with self.pool.connection() as conn:
            memories = conn.execute(
                "SELECT id, kind, session_id, derived_from, source_sessions, key_id, content_sealed, token_digests, "
                "embedding::text, embedding_sealed, created_at, purpose, retention_class, expires_at, source_kind, "
                "source_ref, confidence_basis, confidence, reinforced_at, state, supersedes, challenged_by, "
                "superseded_by, pinned, importance FROM memories WHERE app_name=%s AND user_id=%s ORDER BY id",
                (app_name, subject_key(self.secret, app_name, user_id)),
            ).fetchall()
        return {
            "memories": digest(memories),
            # per row, so a comparison can allow exactly the derived rows an erasure lists as removed
            "memory_rows": {str(m[0]): digest(m) for m in memories},
            "counts": {"memories": len(memories)},
        }

    def claims(self) -> DataClaims:
        """The data map: the memory table (rows, embeddings, provenance naming users' sessions)."""
        return DataClaims(tables=("memories",))

    def vacuum_tables(self) -> tuple[str, ...]:
        """The physical clean-up's vacuum: the memory table (rows, embeddings, its GIN and vector indexes)."""
        return ("memories",)
