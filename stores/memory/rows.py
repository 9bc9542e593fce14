"""Memory rows on Postgres with provenance, and the eraser that follows provenance to derived rows.

Every row carries provenance: app, user, source session, kind (episode, fact, summary), ``derived_from``
(the memory ids a derived row drew on, possibly of several users) and ``source_sessions``. Content is
sealed with the owner's data key, and so is its 64-dimension embedding (an embedding is personal data:
text can be largely reconstructed from one); for ranking, the embedding is also kept rotated by the data key's
orthogonal matrix (``stores.privacy.vector_rotation``), so pgvector ranks the user's rows against the query
rotated the same way (cost follows the user's rows: one indexed read of them); ``token_digests``
holds keyed hashes of the row's words so canary checks find copies anywhere by an indexed lookup without
any token in clear.

The ADK-facing services and the write fence live in ``stores.memory.service``.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.ledgers.owner_holds import held_subjects, partition_by_hold, refuse_if_held
from stores.ledgers.tombstones import fence_lock_key
from stores.memory.common_digests import COMMON_HOLDERS, common_digests
from stores.memory.lifecycle_rules import (
    BASIS_CONFIDENCE,
    SEARCH_THRESHOLD,
    TIERS,
    expiry,
    importance_of,
    tier_of,
)
from stores.memory.verbatim_copies import Candidates, candidates, distinctive_of, holding, row_run_digests
from stores.privacy.crypto import seal
from stores.privacy.embedding import Embedder, HashingEmbedder, tokens, vector_literal
from stores.privacy.identity import (
    derived_key,
    session_digest,
    session_ref,
    subject_key,
    subject_of_stored,
    token_digest,
)
from stores.privacy.keys import DataKeyStore
from stores.privacy.vector_rotation import rotated, rotation

KINDS = ("episode", "fact", "summary", "procedure")
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


def content_digest(secret: bytes, subject: str, text: str) -> str:
    """Keyed hash of the subject and the text's normalised words: the same thing said again matches."""
    key = derived_key(secret, "memory-content")
    return hmac.new(key, f"{subject}\n{' '.join(tokens(text))}".encode(), hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class NewMemory:
    app_name: str
    user_id: str
    text: str
    kind: str = "episode"
    session_id: str | None = None
    derived_from: Sequence[uuid.UUID] = ()
    source_sessions: Sequence[str] = ()
    author: str | None = None
    created_at: datetime | None = None
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    # the lifecycle (stores.memory.lifecycle_rules): why it is held, how long, where from, how sure
    purpose: str = "unspecified"
    retention_class: str = "until_withdrawn"
    source_kind: str = "user"
    source_ref: str | None = None  # PII-free: an event id, a tool name, a document id
    confidence_basis: str = "stated"
    confidence: float | None = None  # None: the basis's starting confidence
    importance: float | None = None  # None: the deterministic rules of memory_lifecycle.importance_of
    pinned: bool = False
    state: str = "active"
    supersedes: Sequence[uuid.UUID] = ()
    challenged_by: Sequence[uuid.UUID] = ()

    @property
    def tier(self) -> str:
        return tier_of(self.kind)


@dataclass(frozen=True)
class FencedWrite:
    inserted: list[uuid.UUID]
    refused: int  # fenced, tombstoned, or already present (same id)
    reinforced: list[uuid.UUID] = field(default_factory=list)  # rows already held that the write re-observed


INSERT_COLUMNS = (
    "id, app_name, user_id, subject_key, session_id, kind, derived_from, source_sessions, author, key_id, "
    "content_sealed, token_digests, embedding_sealed, created_at, purpose, retention_class, expires_at, source_kind, "
    "source_ref, confidence_basis, confidence, importance, pinned, state, supersedes, challenged_by, tokens, "
    "content_digest, embedding_rotated, run_digests"
)
_CASTS = (
    "%s::uuid, %s::text, %s::text, %s::text, %s::text, %s::text, %s::uuid[], %s::text[], %s::text, %s::uuid, "
    "%s::bytea, %s::text[], %s::bytea, %s::timestamptz, %s::text, %s::text, %s::timestamptz, %s::text, "
    "%s::text, %s::text, %s::real, %s::real, %s::boolean, %s::text, %s::uuid[], %s::uuid[], %s::integer, %s::text, "
    "%s::vector, %s::text[]"
)
_INSERT_VALUES = _CASTS
#: a duplicate of a row the subject already holds (same normalised words, still live: not expired, same
#: purpose and retention class) reinforces that row: its confidence is restored, it counts a hit, it learns the
#: new observation's session (so erasing that session still finds it) and keeps the later of the two expiries;
#: the new copy is not written. A re-statement with another purpose or retention, or of an expired row, is its
#: own row (absorbed, its purpose and retention would be lost with the old row). Never a held owner's row:
#: ``insert_fenced`` reads the owners' holds first and writes the observation as its own row instead.
_REINFORCE = (
    "UPDATE memories SET reinforced_at = greatest(coalesce(reinforced_at, created_at), %s::timestamptz), "
    "confidence = greatest(confidence, %s::real), hits = hits + 1, "
    "source_sessions = ARRAY(SELECT DISTINCT s FROM unnest(source_sessions || %s::text[]) AS s ORDER BY s), "
    "expires_at = greatest(expires_at, %s::timestamptz) "
    "WHERE subject_key = %s AND content_digest = %s AND state IN ('active', 'challenged') AND kind = %s "
    "AND purpose = %s AND retention_class = %s AND (expires_at IS NULL) = (%s::timestamptz IS NULL) "
    "AND (expires_at IS NULL OR expires_at > now()) "
    "AND id <> %s AND NOT EXISTS (SELECT 1 FROM user_tombstones WHERE subject_key = %s) "
    "AND NOT EXISTS (SELECT 1 FROM session_tombstones WHERE %s::text IS NOT NULL AND subject_key = %s "
    "AND session_digest = %s) RETURNING id"
)
_FENCED_INSERT = (
    f"INSERT INTO memories ({INSERT_COLUMNS}) SELECT {_CASTS} "
    "WHERE NOT EXISTS (SELECT 1 FROM user_tombstones WHERE subject_key = %s) "
    "AND NOT EXISTS (SELECT 1 FROM session_tombstones WHERE %s::text IS NOT NULL AND subject_key = %s "
    "AND session_digest = %s) ON CONFLICT (id) DO NOTHING RETURNING id"
)


@dataclass(frozen=True)
class FoundMemory:
    id: str
    text: str
    author: str | None
    created_at: datetime
    kind: str = "episode"
    state: str = "active"
    confidence: float = 1.0  # decayed, now


class MemoryStore:
    """Synchronous row access: writes with provenance, search, and the reads the eraser needs."""

    def __init__(
        self,
        pool: ConnectionPool,
        keys: DataKeyStore,
        subject_secret: bytes,
        embedder: Embedder | None = None,
    ) -> None:
        self._pool = pool
        self._keys = keys
        self._secret = subject_secret
        self._embedder = embedder or HashingEmbedder()

    def rows(self, memories: Iterable[NewMemory]) -> list[tuple[Any, ...]]:
        """The rows as ``INSERT_COLUMNS`` holds them: content and embedding sealed, digests, lifecycle values."""
        rows = []
        rotations: dict[uuid.UUID, np.ndarray] = {}  # one matrix per data key for the call
        for m in memories:
            if m.kind not in KINDS:
                raise ValueError(f"unknown memory kind {m.kind!r}")
            if m.tier not in TIERS:
                raise ValueError(f"unknown memory tier {m.tier!r}")
            sk = subject_of_stored(self._secret, m.app_name, m.user_id)
            key = self._keys.current(sk)  # content, embedding and rotation under this one key, never read back
            key_id, sealed = key.key_id, seal(key, m.text.encode("utf-8"), m.id.bytes)
            words = tokens(m.text)
            ordered = [token_digest(self._secret, t) for t in words]
            digests = sorted(set(ordered))
            created = m.created_at or datetime.now(UTC)
            confidence = m.confidence if m.confidence is not None else BASIS_CONFIDENCE.get(m.confidence_basis, 1.0)
            embedded = self._embedder.embed(m.text)
            if key_id not in rotations:
                rotations[key_id] = rotation(key, len(embedded))
            rows.append(
                (
                    m.id,
                    m.app_name,
                    sk,  # user_id: filed under the subject key, so no raw id reaches a data file
                    sk,
                    m.session_id,
                    m.kind,
                    list(m.derived_from),
                    list(m.source_sessions),
                    m.author,
                    key_id,
                    sealed,
                    digests,
                    seal(key, embedding_bytes(embedded), embedding_context(m.id)),
                    created,
                    m.purpose,
                    m.retention_class,
                    expiry(m.retention_class, created),
                    m.source_kind,
                    m.source_ref,
                    m.confidence_basis,
                    confidence,
                    importance_of(words, m.importance),
                    m.pinned,
                    m.state,
                    list(m.supersedes),
                    list(m.challenged_by),
                    len(words),
                    content_digest(self._secret, sk, m.text),
                    vector_literal(rotated(rotations[key_id], embedded)),
                    row_run_digests(ordered),
                )
            )
        return rows

    def insert(self, memories: Iterable[NewMemory]) -> list[uuid.UUID]:
        """Write rows without consulting any tombstone (seeding, the summariser's own rows, tests that play
        a writer who bypasses the fence). Agent runtimes write through ``insert_fenced``."""
        rows = self.rows(memories)
        if not rows:
            return []
        with self._pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({_INSERT_VALUES}) ON CONFLICT (id) DO NOTHING", rows
            )
        return [r[0] for r in rows]

    def insert_fenced(self, memories: Iterable[NewMemory], *, reinforce: bool = True) -> FencedWrite:
        """Write rows unless a user tombstone of their subject, or a session tombstone of their (subject,
        session), exists: the check is part of each INSERT statement, so no fence written in between can
        be passed. ``TombstoneLedger.fence_user`` takes the subject's fence lock exclusively while it writes
        the tombstone; this takes it shared before inserting, so either the rows are committed before the
        fence exists (and the erasure that follows the fence finds them), or the INSERT's snapshot sees
        the fence and writes nothing."""
        rows = self.rows(memories)
        if not rows:
            return FencedWrite([], 0)
        inserted: list[uuid.UUID] = []
        reinforced: list[uuid.UUID] = []
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for sk in sorted({r[3] for r in rows}):
                cur.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", (fence_lock_key(sk),))
            # reinforcing changes an existing row: never a held owner's (the gate; inserting is not a change)
            held = held_subjects(conn, {r[3] for r in rows}) if reinforce else set()
            for r in rows:
                digest = session_digest(self._secret, r[3], r[4]) if r[4] else None
                if reinforce and not r[24] and not r[25] and r[3] not in held:  # a correction stays its own row
                    sets = (r[13], r[20], r[7], r[16])  # reinforced_at, confidence, sessions, expiry
                    same = (r[3], r[27], r[5], r[14], r[15], r[16], r[0])  # owner, words, kind, purpose, retention
                    cur.execute(_REINFORCE, (*sets, *same, r[3], digest, r[3], digest))
                    again = cur.fetchone()
                    if again is not None:
                        reinforced.append(again[0])
                        continue
                cur.execute(_FENCED_INSERT, (*r, r[3], digest, r[3], digest))
                if cur.fetchone() is not None:
                    inserted.append(r[0])
        return FencedWrite(inserted, len(rows) - len(inserted) - len(reinforced), reinforced)

    @property
    def subject_secret(self) -> bytes:
        return self._secret

    def decrypt_row(self, row_id: uuid.UUID, sealed: bytes) -> str:
        return self._keys.decrypt(sealed, row_id.bytes).decode("utf-8")

    def row_opener(self) -> Callable[[bytes, bytes], bytes | None]:
        """Rows' contents opened with one key lookup per data key for the opener's life (``DataKeyStore.opener``:
        ``(sealed, row id bytes)`` -> plaintext, ``None`` for a shredded key)."""
        return self._keys.opener()

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
        with self._pool.connection() as conn:
            nearest = self._rotated_nearest(conn, queries, where, params, limit, not everything and not legacy)
            if legacy:  # rows of both kinds: the merged ranking's rows read (and their hits counted) apart
                ranked = sorted([*ranked, *((d, r[0]) for d, *r in nearest)], key=lambda r: (r[0], str(r[1])))
                chosen = [row_id for _d, row_id in ranked[:limit]]
                found = conn.execute(
                    f"SELECT id, content_sealed, author, created_at, kind, state, {DECAYED_SQL} FROM memories "
                    "WHERE id = ANY(%s)",
                    (chosen,),
                ).fetchall()
                if found and not everything:
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

    def texts_of(self, subject: str, ids: Sequence[str]) -> list[str]:
        """The readable texts of the subject's rows ``ids`` (in memory only; a shredded key reads as nothing)."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, content_sealed FROM memories WHERE subject_key = %s AND id = ANY(%s::uuid[]) ORDER BY id",
                (subject, [str(uuid.UUID(i)) for i in ids]),
            ).fetchall()
        out: list[str] = []
        for row_id, sealed in rows:
            try:
                out.append(self.decrypt_row(row_id, bytes(sealed)))
            except DataKeyShredded:
                continue
        return out

    def delete(self, app_name: str, user_id: str, memory_id: str) -> int:
        """One of the user's own memories, deleted (the agent's memory tool); refused under a hold."""
        sk = subject_key(self._secret, app_name, user_id)
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, [sk])
            return conn.execute(
                "DELETE FROM memories WHERE app_name = %s AND user_id = %s AND id = %s",
                (app_name, sk, uuid.UUID(memory_id)),
            ).rowcount

    def rows_of(self, app_name: str, user_id: str) -> list[tuple[uuid.UUID, str | None]]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, session_id FROM memories WHERE app_name = %s AND user_id = %s ORDER BY id",
                (app_name, subject_key(self._secret, app_name, user_id)),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def summarise(self, app_name: str, owner_user_id: str, memory_ids: Sequence[uuid.UUID]) -> uuid.UUID | None:
        """Create a derived summary of the given memories (any users), filed under ``owner_user_id``."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, content_sealed, session_id, subject_key FROM memories WHERE id = ANY(%s)",
                (list(memory_ids),),
            ).fetchall()
        readable: list[tuple[uuid.UUID, str, str | None, str]] = []
        for row_id, sealed, session_id, owner in rows:
            try:
                readable.append((row_id, self.decrypt_row(row_id, bytes(sealed)), session_id, owner))
            except DataKeyShredded:
                continue
        summary = summary_of(app_name, owner_user_id, readable)
        if summary is None:
            return None
        return self.insert([summary])[0]


def summary_of(
    app_name: str, owner_user_id: str, sources: Sequence[tuple[uuid.UUID, str, str | None, str]]
) -> NewMemory | None:
    """The summary row the summariser derives from ``sources`` (row id, text, session id, owner's subject key),
    filed under ``owner_user_id``, its provenance naming every source row and session; ``None`` for none."""
    if not sources:
        return None
    return NewMemory(
        app_name=app_name,
        user_id=owner_user_id,
        text="Summary: " + " / ".join(" ".join(text.split()[:12]) for _id, text, _s, _o in sources),
        kind="summary",
        derived_from=[row_id for row_id, _t, _s, _o in sources],
        source_sessions=sorted({session_ref(owner, sid) for _id, _t, sid, owner in sources if sid}),
        author="summariser",
    )


# ----- erase adapter -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryErasure:
    rows: int
    derived: int
    derived_ids: list[str]
    held: int = 0  # derived rows kept: their owner is under a legal hold (``stores.ledgers.owner_holds``)


#: Rows whose provenance names one of the given memory ids or session refs. One GIN probe per given
#: element (a join over ``unnest``): ``derived_from && <13,000 ids>`` made the planner scan the whole table
#: and test every row against the whole array (0.8 s for a large user on a small platform, growing with both).
_NAMING = """
SELECT m.id FROM unnest(%(memories)s::uuid[]) AS given(id) JOIN memories m ON m.derived_from @> ARRAY[given.id]
UNION
SELECT m.id FROM unnest(%(sessions)s::text[]) AS given(ref) JOIN memories m ON m.source_sessions @> ARRAY[given.ref]
"""


class MemoryEraser:
    """Deletes a user's rows and every row derived from them (transitively), by indexed lookups.

    Provenance is followed from the user's rows that still exist *and* from every row an earlier pass
    erased (``erased_memories``, written in the same transaction as each delete): a summary written after
    the memory step whose ``derived_from`` names the user's deleted facts is found by every later pass.
    """

    def __init__(self, pool: ConnectionPool, batch: int = 1000) -> None:
        self._pool = pool
        self._batch = batch

    def _closure(
        self,
        conn: Connection[tuple[Any, ...]],
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None,
        delete_own: bool = False,
    ) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """(the user's own row ids, ids of rows derived from them, from their erased rows or sessions).

        ``session_refs`` are ``session_ref(subject key, session id)`` values of the erased sessions.
        With ``delete_own`` the own rows are deleted as they are found (one statement, by the subject key
        index); the caller's transaction makes that and the derived rows' deletion one unit. A row whose
        id was erased before and which exists again (a replayed write of the same id) counts as derived.
        """
        verb = "DELETE FROM memories" if delete_own else "SELECT id FROM memories"
        tail = " RETURNING id" if delete_own else ""
        own = [
            r[0]
            for r in conn.execute(
                f"{verb} WHERE subject_key = %s AND (%s::timestamptz IS NULL OR created_at < %s){tail}",
                (subject, created_before, created_before),
            ).fetchall()
        ]
        erased = [
            r[0]
            for r in conn.execute("SELECT memory_id FROM erased_memories WHERE subject_key = %s", (subject,)).fetchall()
        ]
        seen = set(own) | set(erased)
        derived: list[uuid.UUID] = [
            r[0] for r in conn.execute("SELECT id FROM memories WHERE id = ANY(%s)", (erased,)).fetchall()
        ]
        frontier = [*own, *erased]
        sessions = list(session_refs)
        while frontier or sessions:
            rows = conn.execute(_NAMING, {"memories": frontier, "sessions": sessions}).fetchall()
            sessions = []
            frontier = [r[0] for r in rows if r[0] not in seen]
            seen.update(frontier)
            derived.extend(frontier)
        return own, derived

    def erase_user(
        self,
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None = None,
        *,
        request_id: str,
    ) -> MemoryErasure:
        """Delete the subject's rows (by the subject key index) and every row derived from them, and record
        every deleted id in ``erased_memories``.

        One transaction: a retry after a crash finds the whole closure again (deleting the user's own
        rows first and their derived rows, or the record of them, in a later transaction could lose the
        only path to the latter).
        """
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, [subject])  # the gate for the subject's own rows, in the deleting transaction
            own, found = self._closure(conn, subject, session_refs, created_before, delete_own=True)
            derived, held = partition_by_hold(conn, found)  # another owner's hold wins over this erasure
            for start in range(0, len(derived), self._batch):
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (derived[start : start + self._batch],))
            if own or derived:
                conn.execute(
                    "INSERT INTO erased_memories (subject_key, memory_id, request_id, derived) "
                    "SELECT %s, given.id, %s, given.derived "
                    "FROM unnest(%s::uuid[], %s::boolean[]) AS given(id, derived) ON CONFLICT DO NOTHING",
                    (subject, request_id, [*own, *derived], [False] * len(own) + [True] * len(derived)),
                )
            # this request's derived rows, those of an earlier attempt too (killed before it could record them)
            recorded = conn.execute(
                "SELECT memory_id FROM erased_memories WHERE request_id = %s AND derived", (request_id,)
            ).fetchall()
        derived_ids = sorted({str(i) for i in derived} | {str(r[0]) for r in recorded})
        return MemoryErasure(rows=len(own), derived=len(derived), derived_ids=derived_ids, held=len(held))

    def count_user(self, subject: str, session_refs: Sequence[str]) -> tuple[int, int]:
        with self._pool.connection() as conn:
            own, derived = self._closure(conn, subject, session_refs, None)
        return len(own), len(derived)

    def count_derived_from(self, memory_ids: Sequence[str], session_refs: Sequence[str]) -> int:
        """Rows whose provenance names any of these (erased) memories or sessions (one hop)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM ({_NAMING}) AS naming",
                {"memories": [uuid.UUID(m) for m in memory_ids], "sessions": list(session_refs)},
            ).fetchone()
        return int(row[0]) if row else 0

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

    def derived_ids(self, subject: str, session_refs: Sequence[str]) -> list[uuid.UUID]:
        """Rows derived from the subject's rows or sessions (transitively, whoever they are filed under)."""
        with self._pool.connection() as conn:
            _own, derived = self._closure(conn, subject, session_refs, None)
        return derived

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
