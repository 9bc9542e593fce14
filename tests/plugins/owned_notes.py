"""The store docs/adding-a-store.md has a platform add, as a package of its own: one module and one entry point.

A Postgres table of the platform's (``owned_notes``: a note per row, filed under the writer's subject key) and
its adapter, registered under ``erasure.adapters`` only (``ENTRY``, the line a platform's pyproject gives it;
``installed`` puts it on ``sys.path`` the way ``pip`` would). Nothing of this project names it: the saga, the
verifier, the sweeps, the restore replay, item forgetting, the presence probe, the vacuum and the hold matrix
reach it through the registry. Every delete reads the owner's hold inside its own transaction (the gate).

Beside the adapter's interface it has the guide's ``seed`` hook (the seeders' demo data) and one hook of test
support, as ``fingerprint`` is: ``copy_items``, what the platform's writer does when it keeps a copy of some of
the user's memory items (the hold matrix's forget cells need copies a forget covers).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from stores.adapters.context import StoreContext
from stores.adapters.interface import Beat, Bound, DataClaims, ForgetScope, Remaining, Subject, Swept
from stores.books.request_record import RequestRecord
from stores.ledgers.owner_holds import refuse_if_held
from stores.privacy.identity import subject_key
from tests.integration.test_adapter_plugin import install_distribution

TABLE = "owned_notes"
#: the store's whole registration: what its distribution's ``entry_points.txt`` says
ENTRY = "[erasure.adapters]\nowned_notes = tests.plugins.owned_notes:OwnedNotesAdapter\n"
#: what the platform's own migration creates for it
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id text PRIMARY KEY, subject_key text NOT NULL, app_name text NOT NULL, "
    "session_ref text, note text NOT NULL, created_at timestamptz DEFAULT now())",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_subject ON {TABLE} (subject_key)",
)
SEED_NOTES = ("call back after lunch", "prefers the paper invoice", "parcel goes to the side door")


class OwnedNotesAdapter:
    """The guide's Postgres store: one table, its rows by subject key; every delete through the hold gate."""

    name = "owned_notes"
    after: tuple[str, ...] = ("memory",)
    batched = False

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.secret = context.pool, context.subject_secret

    def locate(self, subject: Subject) -> dict[str, int]:
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE subject_key = %s", (subject.subject_key,)
            ).fetchone()
        return {"owned_notes": int(row[0]) if row else 0}

    def _delete(self, subject: str, where: str, args: tuple[Any, ...]) -> int:
        with self.pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, [subject])
            return int(conn.execute(f"DELETE FROM {TABLE} WHERE subject_key = %s{where}", (subject, *args)).rowcount)

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        return {"owned_notes": self._delete(subject.subject_key, "", ())}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        before = bound.erased_at if bound else datetime.max.astimezone()
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE subject_key = %s AND created_at < %s",
                (subject.subject_key, before),
            ).fetchone()
        return Remaining({"owned_notes": int(row[0]) if row else 0})

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        if before is None:
            return Swept({"owned_notes": self._delete(subject.subject_key, "", ())})
        return Swept({"owned_notes": self._delete(subject.subject_key, " AND created_at < %s", (before,))})

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT id, note, session_ref, created_at FROM {TABLE} WHERE subject_key = %s ORDER BY id",
                (subject_key(self.secret, app_name, user_id),),
            ).fetchall()
        return {"owned_notes": hashlib.sha256(repr(rows).encode()).hexdigest(), "counts": {"owned_notes": len(rows)}}

    def claims(self) -> DataClaims:
        return DataClaims(tables=(TABLE,))

    def _covered(self, scope: ForgetScope) -> list[str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT id, note, session_ref FROM {TABLE} WHERE subject_key = %s", (scope.subject_key,)
            ).fetchall()
        return [
            i
            for i, note, ref in rows
            if i in scope.memory_ids or (ref and ref == scope.session_ref) or scope.covers(i, note)
        ]

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        going = self._covered(scope)
        return {"owned_notes": self._delete(scope.subject_key, " AND id = ANY(%s)", (going,)) if going else 0}

    def items_left(self, scope: ForgetScope) -> int:
        return len(self._covered(scope))

    def seed(self, app_name: str, user_id: str, rng: random.Random) -> dict[str, int]:
        """``Seeded``: two demo notes of the user (the seeders' hook)."""
        for note in rng.sample(SEED_NOTES, k=2):
            insert(self.pool, self.secret, app_name, user_id, note)
        return {"owned_notes": 2}

    def copy_items(self, app_name: str, user_id: str, items: Mapping[str, str]) -> int:
        """Test support: a copy of each of the user's memory items (id -> text), under the item's own id."""
        for item_id, text in items.items():
            insert(self.pool, self.secret, app_name, user_id, text, row_id=item_id)
        return len(items)


def insert(
    pool: ConnectionPool,
    secret: bytes,
    app: str,
    user: str,
    note: str,
    session_ref: str | None = None,
    row_id: str | None = None,
) -> str:
    """What the platform's own writer does: one row under the user's subject key (in clear: a test store)."""
    row_id = row_id or str(uuid.uuid4())
    with pool.connection() as conn:
        conn.execute(
            f"INSERT INTO {TABLE} (id, subject_key, app_name, session_ref, note) VALUES (%s, %s, %s, %s, %s)",
            (row_id, subject_key(secret, app, user), app, session_ref, note),
        )
    return row_id


@contextmanager
def installed(pool: ConnectionPool, site: Path) -> Iterator[None]:
    """The store installed as a platform installs it: its table (the platform's migration) and its
    distribution on ``sys.path`` (``pip``). The table is dropped after, so the data map of tests that do not
    register the store never sees an unclaimed table."""
    with pool.connection() as conn:
        for statement in SCHEMA:
            conn.execute(statement)
    install_distribution(site, "owned-notes-store", ENTRY)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.syspath_prepend(str(site))
            yield
    finally:
        with pool.connection() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
