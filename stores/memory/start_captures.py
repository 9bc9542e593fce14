"""What ``begin_request`` captures of a subject's memories before any step runs, and the copy reads its check
repeats: a sealed sample (to prove the key shredded), a bounded sample of the user's texts (for canaries and
word runs), the rows of others holding one of the user's runs word for word (``stores.memory.verbatim_copies``)
and the word digests no one else holds (canaries).

Reads only. ``StartCaptures`` is a part of ``stores.memory.eraser.MemoryEraser``, which sets its pool.
(``stores.memory.capture`` is another matter: the checks a memory write passes before it is stored.)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid
from stores.memory.common_digests import COMMON_HOLDERS, common_digests
from stores.memory.verbatim_copies import Candidates, candidates, distinctive_of, holding

if TYPE_CHECKING:
    from stores.memory.store import MemoryStore


class StartCaptures:
    """The capture reads of ``MemoryEraser`` (it is one: ``MemoryEraser(StartCaptures)``)."""

    _pool: ConnectionPool

    def sample_sealed(self, subject: str) -> tuple[str, bytes] | None:
        """One (row id, ciphertext) of the user: kept by the verifier to prove the key is shredded."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT id, content_sealed FROM memories WHERE subject_key = %s LIMIT 1", (subject,)
            ).fetchone()
        return (str(row[0]), bytes(row[1])) if row else None

    def user_texts(self, subject: str, store: MemoryStore, limit: int = 200) -> list[str]:
        """The texts of a bounded sample of the user's rows (decrypted in memory only)."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, content_sealed FROM memories WHERE subject_key = %s ORDER BY created_at LIMIT %s",
                (subject, limit),
            ).fetchall()
        open_one = store.row_opener()  # the user's rows share a few data keys: one lookup each
        texts = []
        for row_id, sealed in rows:
            plain = open_one(bytes(sealed), row_id.bytes)
            if plain is not None:  # None: its key is shredded
                texts.append(plain.decode("utf-8"))
        return texts

    def holders_of_runs(
        self,
        runs: Sequence[Sequence[str]],
        excluding_subject: str,
        store: MemoryStore,
        excluding_rows: Sequence[uuid.UUID] = (),
    ) -> set[uuid.UUID]:
        """Rows of other subjects holding one of ``runs`` word for word (``stores.memory.verbatim_copies``)."""
        with self._pool.connection() as conn:
            probed = candidates(conn, runs, excluding_subject, excluding_rows)
        return self._holding(probed, store)

    def distinctive_runs_and_holders(
        self,
        runs: Sequence[Sequence[str]],
        excluding_subject: str,
        store: MemoryStore,
        excluding_rows: Sequence[uuid.UUID] = (),
    ) -> tuple[list[list[str]], set[uuid.UUID]]:
        """Those of ``runs`` few enough rows of others hold to be the user's text, and the rows of others holding
        one of those word for word (``stores.memory.verbatim_copies``): one probe serves both."""
        with self._pool.connection() as conn:
            probed = distinctive_of(candidates(conn, runs, excluding_subject, excluding_rows))
        return [list(run) for run, _rows in probed], self._holding(probed, store)

    @staticmethod
    def _holding(probed: Candidates, store: MemoryStore) -> set[uuid.UUID]:
        """The candidates holding their run, opened with no pool connection held: a data key's read takes one
        of its own, and a call holding one while asking for another starved the pool under concurrent erasures
        (PoolTimeout in begin_request)."""
        open_one = store.row_opener()  # one key lookup per data key among the candidates

        def opened(row_id: uuid.UUID, sealed: bytes) -> str | None:
            try:
                plain = open_one(sealed, row_id.bytes)
            except CiphertextInvalid:
                return None
            return None if plain is None else plain.decode("utf-8")

        return holding(store.subject_secret, opened, probed)

    def unheld_digests(
        self,
        digests: Sequence[str],
        excluding_subject: str,
        excluding_rows: Sequence[uuid.UUID] = (),
        common_holders: int = COMMON_HOLDERS,
    ) -> list[str]:
        """Those of ``digests`` (in their order) no row of anyone else holds, ``excluding_rows`` aside (the
        rows derived from the subject's, which the erasure removes): one index probe per digest, in one round
        trip. Digests the table's statistics put in ``common_holders`` rows or more are left out unprobed
        (``stores.memory.common_digests``: a GIN probe reads every holder, so a common word would cost what the
        platform holds of it)."""
        with self._pool.connection() as conn:
            common = common_digests(conn, digests, common_holders)
            digests = [d for d in digests if d not in common]
            rows = conn.execute(
                "SELECT given.d FROM unnest(%s::text[]) WITH ORDINALITY AS given(d, n) WHERE NOT EXISTS "
                "(SELECT 1 FROM memories m WHERE m.token_digests @> ARRAY[given.d] AND m.subject_key <> %s "
                "AND m.id <> ALL(%s::uuid[])) ORDER BY given.n",
                (list(digests), excluding_subject, list(excluding_rows)),
            ).fetchall()
        return [r[0] for r in rows]
