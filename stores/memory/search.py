"""Recall: the user's rows nearest to a query, ranked without opening their embeddings where it can.

Each row's 64-dimension embedding is sealed with the owner's data key (an embedding is personal data: text can
be largely reconstructed from one); for ranking, it is also kept rotated by the data key's orthogonal matrix
(``stores.privacy.vector_rotation``), so pgvector ranks the user's rows against the query rotated the same way
(cost follows the user's rows: one indexed read of them). Rows written before rotated embeddings existed are
ranked in process from their sealed (or plain) embedding.

Recall counts a hit and the access time of each row it returns (eviction's frequency and recency): a change
of the owner's rows, so it is gated like any other (``stores.ledgers.owner_holds.held_subjects`` in the
transaction that counts them). A held owner's rows are returned as ever, and their counters do not move.

``MemorySearch`` is the reading half of ``stores.memory.store.MemoryStore``, which sets its pool, keys, secret
and embedder.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.infra.errors import DataKeyShredded
from stores.ledgers.owner_holds import held_subjects
from stores.memory.lifecycle_rules import SEARCH_THRESHOLD
from stores.privacy.embedding import Embedder, vector_literal
from stores.privacy.identity import subject_key
from stores.privacy.keys import DataKeyStore
from stores.privacy.vector_rotation import rotated, rotation

#: decayed confidence in SQL (the same rule as ``memory_lifecycle.decayed``): halved per half-life of the tier;
#: in double precision (``date_part``: ``extract`` gives numeric, whose ``power`` cost 10 us a row on recall)
DECAYED_SQL = (
    "(confidence * power(0.5, greatest(date_part('epoch', now() - coalesce(reinforced_at, created_at)), 0) / "
    "CASE WHEN kind = 'episode' THEN 2592000.0 WHEN kind = 'procedure' THEN 31536000.0 ELSE 15552000.0 END))"
)
#: what recall may return: live beliefs (challenged ones too, flagged), not expired, confident enough
RECALLABLE_SQL = (
    "state IN ('active', 'challenged') AND (expires_at IS NULL OR expires_at > now()) "
    f"AND {DECAYED_SQL} >= %(threshold)s"
)


def embedding_bytes(vec: Sequence[float]) -> bytes:
    """An embedding as it is sealed: little-endian float32."""
    return np.asarray(vec, dtype="<f4").tobytes()


def embedding_context(row_id: uuid.UUID) -> bytes:
    """The AAD of a row's sealed embedding: bound to the row, and apart from its content's."""
    return row_id.bytes + b"/embedding"


@dataclass(frozen=True)
class FoundMemory:
    id: str
    text: str
    author: str | None
    created_at: datetime
    kind: str = "episode"
    state: str = "active"
    confidence: float = 1.0  # decayed, now


class MemorySearch:
    """Search over the rows ``MemoryStore`` writes (it is one: ``MemoryStore(MemorySearch)``)."""

    _pool: ConnectionPool
    _keys: DataKeyStore
    _secret: bytes
    _embedder: Embedder

    def decrypt_row(self, row_id: uuid.UUID, sealed: bytes) -> str:
        return self._keys.decrypt(sealed, row_id.bytes).decode("utf-8")

    def search(
        self,
        app_name: str,
        user_id: str,
        query: str,
        limit: int = 10,
        *,
        threshold: float = SEARCH_THRESHOLD,
        everything: bool = False,
    ) -> list[FoundMemory]:
        """The user's recallable rows nearest to ``query``: superseded, deleted, expired and decayed rows are
        filtered before ranking (so a retired belief never competes), challenged ones come back flagged.
        Every row returned counts a hit and its access time (eviction's frequency and recency).

        ``everything``: every row the user holds, whatever its state or confidence, and no hit counted: what
        a forget resolves against (a superseded or decayed belief is still the user's data to forget)."""
        sk = subject_key(self._secret, app_name, user_id)
        return self.search_subject(app_name, sk, query, limit, threshold=threshold, everything=everything)

    def search_subject(
        self,
        app_name: str,
        subject: str,
        query: str,
        limit: int = 10,
        *,
        threshold: float = SEARCH_THRESHOLD,
        everything: bool = False,
    ) -> list[FoundMemory]:
        """``search`` by the subject key the rows are filed under (the raw id not needed: expiry, checks).

        Rows with a rotated embedding are ranked by pgvector against the query rotated under each of the
        subject's data keys (``_rotated_nearest``); rows written before rotated embeddings existed by their
        sealed (or plain) embedding opened in process (``_nearest``). The two rankings are merged."""
        query_vec = np.asarray(self._embedder.embed(query), dtype=np.float32)
        where = "TRUE" if everything else RECALLABLE_SQL
        params = {"app": app_name, "user": subject, "threshold": threshold}
        with self._pool.connection() as conn:  # the subject's keys and its unrotated rows: one statement
            both = conn.execute(
                "SELECT TRUE, key_id, NULL::bytea, NULL::text FROM data_keys WHERE subject_key = %(user)s "
                "UNION ALL SELECT FALSE, id, embedding_sealed, embedding::text FROM memories "
                f"WHERE app_name = %(app)s AND user_id = %(user)s AND embedding_rotated IS NULL AND {where}",
                params,
                binary=True,  # the sealed vectors arrive as bytes, not as hex text to parse
            ).fetchall()
        key_ids = [r[1] for r in both if r[0]]
        legacy = [tuple(r[1:]) for r in both if not r[0]]
        # keys opened with the connection given back (a data key's read takes one of its own)
        queries = self._rotated_queries(key_ids, query_vec)
        ranked = self._nearest(legacy, query_vec, limit) if legacy else []
        with self._pool.connection() as conn, conn.transaction():
            # the owner's hold read under its hold lock, in the transaction that counts the hits: a held
            # owner's counters never move (the rows searched are all filed under ``subject``, their owner)
            counting = not everything and not held_subjects(conn, [subject])
            nearest = self._rotated_nearest(conn, queries, where, params, limit, counting and not legacy)
            if legacy:  # rows of both kinds: the merged ranking's rows read (and their hits counted) apart
                ranked = sorted([*ranked, *((d, r[0]) for d, *r in nearest)], key=lambda r: (r[0], str(r[1])))
                chosen = [row_id for _d, row_id in ranked[:limit]]
                found = conn.execute(
                    f"SELECT id, content_sealed, author, created_at, kind, state, {DECAYED_SQL} FROM memories "
                    "WHERE id = ANY(%s)",
                    (chosen,),
                ).fetchall()
                if found and counting:
                    conn.execute(
                        "UPDATE memories SET hits = hits + 1, last_accessed_at = now() WHERE id = ANY(%s)",
                        ([r[0] for r in found],),
                    )
            else:
                found = [tuple(r) for _d, *r in nearest]
                chosen = [r[0] for r in found]
        order = {row_id: n for n, row_id in enumerate(chosen)}
        rows = sorted(found, key=lambda r: order[r[0]])
        out: list[FoundMemory] = []
        for row_id, sealed, author, created, kind, state, confidence in rows:
            try:
                text = self.decrypt_row(row_id, bytes(sealed))
            except DataKeyShredded:
                continue
            out.append(FoundMemory(str(row_id), text, author, created, kind, state, float(confidence)))
        return out

    def _rotated_queries(self, keys: Sequence[uuid.UUID], query: Any) -> list[tuple[uuid.UUID, str]]:
        """The query rotated under each of ``keys`` still live (a shredded key's rows match no query, as a
        sealed row under it opens to nothing)."""
        queries: list[tuple[uuid.UUID, str]] = []
        for key_id in keys:
            try:
                key = self._keys.get(key_id)
            except DataKeyShredded:
                continue
            queries.append((key_id, vector_literal(rotated(rotation(key, len(query)), query))))
        return queries

    def _rotated_nearest(
        self,
        conn: Connection[Any],
        queries: Sequence[tuple[uuid.UUID, str]],
        where: str,
        params: dict[str, Any],
        limit: int,
        count_hits: bool,
    ) -> list[tuple[Any, ...]]:
        """(cosine distance, id, sealed content, author, created at, kind, state, decayed confidence) of the
        ``limit`` rotated rows nearest to the query, nearest first, ranked by pgvector: each row against the
        query rotated under its own data key (``queries``). ``count_hits``: the rows returned count a hit and
        their access time, in the same statement."""
        if not queries:
            return []
        touch = (
            ", touched AS (UPDATE memories SET hits = hits + 1, last_accessed_at = now() "
            "WHERE id IN (SELECT id FROM ranked))"
            if count_hits
            else ""
        )
        # each row against the query rotated under its own key: one constant per key (parsed once, no join),
        # the decayed confidence computed for the rows returned only
        names = {f"k{n}": key_id for n, (key_id, _v) in enumerate(queries)}
        vecs = {f"v{n}": vec for n, (_k, vec) in enumerate(queries)}
        if len(queries) == 1:
            query_vec = "%(v0)s::vector"
        else:
            arms = " ".join(f"WHEN %(k{n})s::uuid THEN %(v{n})s::vector" for n in range(len(queries)))
            query_vec = f"(CASE m.key_id {arms} END)"
        rows = conn.execute(
            f"WITH ranked AS (SELECT m.embedding_rotated <=> {query_vec} AS distance, m.id, m.content_sealed, "
            "m.author, m.created_at, m.kind, m.state, m.confidence, m.reinforced_at FROM memories m "
            "WHERE m.app_name = %(app)s AND m.user_id = %(user)s AND m.key_id = ANY(%(keys)s::uuid[]) "
            f"AND m.embedding_rotated IS NOT NULL AND {where} "
            f"ORDER BY distance, m.id LIMIT %(limit)s){touch} "
            f"SELECT distance, id, content_sealed, author, created_at, kind, state, {DECAYED_SQL} "
            "FROM ranked ORDER BY distance, id",
            {**params, **names, **vecs, "keys": [k for k, _v in queries], "limit": limit},
        ).fetchall()
        # a zero vector (no words) has no cosine: pgvector says NaN, the in-process ranking says 2 (opposite)
        return [(float(r[0]) if r[0] == r[0] else 2.0, *r[1:]) for r in rows]

    def _nearest(self, candidates: Sequence[tuple[Any, ...]], query: Any, limit: int) -> list[tuple[float, uuid.UUID]]:
        """(cosine distance, id) of the ``limit`` candidates nearest to ``query`` (pgvector's ``<=>``), from
        their sealed embeddings (opened in memory only; a shredded key drops the row) or a legacy plain one."""
        sealed = [(bytes(r[1]), embedding_context(r[0])) for r in candidates if r[1] is not None]
        opened = iter(self._keys.decrypt_many(sealed))
        ids: list[uuid.UUID] = []
        vectors: list[bytes] = []
        for row_id, blob, plain in candidates:
            if blob is not None:
                raw = next(opened)
                if raw is None:
                    continue
                vectors.append(raw)
            elif plain is not None:
                vectors.append(embedding_bytes([float(v) for v in plain.strip("[]").split(",")]))
            else:
                continue
            ids.append(row_id)
        if not ids:
            return []
        matrix = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(ids), -1)
        norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query)) or 1.0)
        similarity = np.divide(matrix @ query, norms, out=np.full(len(ids), -1.0, dtype=np.float64), where=norms > 0)
        distance = 1.0 - similarity
        top = np.argpartition(distance, limit - 1)[:limit] if len(ids) > limit else np.arange(len(ids))
        return sorted(((float(distance[n]), ids[n]) for n in top), key=lambda r: (r[0], str(r[1])))
