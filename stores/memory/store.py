"""Memory rows on Postgres with provenance: the store that writes them, fenced or not, and reads them back.

Every row carries provenance: app, user, source session, kind (episode, fact, summary), ``derived_from``
(the memory ids a derived row drew on, possibly of several users) and ``source_sessions``. Content is
sealed with the owner's data key, and so is its 64-dimension embedding; the embedding is also kept rotated
by the data key's orthogonal matrix for ranking (``stores.memory.search``, whose ``MemorySearch`` this store
is); ``token_digests`` holds keyed hashes of the row's words so canary checks find copies anywhere by an
indexed lookup without any token in clear.

The ADK-facing services and the write fence live in ``stores.memory.service``; the eraser that follows
provenance to derived rows in ``stores.memory.eraser``.
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
from psycopg_pool import ConnectionPool

from stores.infra.errors import DataKeyShredded
from stores.ledgers.owner_holds import held_subjects, refuse_if_held
from stores.ledgers.tombstones import fence_lock_key
from stores.memory.lifecycle_rules import (
    BASIS_CONFIDENCE,
    TIERS,
    expiry,
    importance_of,
    tier_of,
)
from stores.memory.search import MemorySearch, embedding_bytes, embedding_context
from stores.memory.verbatim_copies import row_run_digests
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
    #: rows the write would have reinforced, kept as they are: their owner is under a legal hold (the
    #: observation is written as its own row instead)
    held: list[uuid.UUID] = field(default_factory=list)


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
#: ``insert_fenced`` reads the owners' holds first and writes the observation as its own row instead (the row
#: it would have reinforced found by the same match, ``_WOULD_REINFORCE``, and reported: ``FencedWrite.held``).
_SAME_ROW = (
    "subject_key = %s AND content_digest = %s AND state IN ('active', 'challenged') AND kind = %s "
    "AND purpose = %s AND retention_class = %s AND (expires_at IS NULL) = (%s::timestamptz IS NULL) "
    "AND (expires_at IS NULL OR expires_at > now()) "
    "AND id <> %s AND NOT EXISTS (SELECT 1 FROM user_tombstones WHERE subject_key = %s) "
    "AND NOT EXISTS (SELECT 1 FROM session_tombstones WHERE %s::text IS NOT NULL AND subject_key = %s "
    "AND session_digest = %s)"
)
_REINFORCE = (
    "UPDATE memories SET reinforced_at = greatest(coalesce(reinforced_at, created_at), %s::timestamptz), "
    "confidence = greatest(confidence, %s::real), hits = hits + 1, "
    "source_sessions = ARRAY(SELECT DISTINCT s FROM unnest(source_sessions || %s::text[]) AS s ORDER BY s), "
    f"expires_at = greatest(expires_at, %s::timestamptz) WHERE {_SAME_ROW} RETURNING id"
)
_WOULD_REINFORCE = f"SELECT id FROM memories WHERE {_SAME_ROW} ORDER BY id LIMIT 1"
_FENCED_INSERT = (
    f"INSERT INTO memories ({INSERT_COLUMNS}) SELECT {_CASTS} "
    "WHERE NOT EXISTS (SELECT 1 FROM user_tombstones WHERE subject_key = %s) "
    "AND NOT EXISTS (SELECT 1 FROM session_tombstones WHERE %s::text IS NOT NULL AND subject_key = %s "
    "AND session_digest = %s) ON CONFLICT (id) DO NOTHING RETURNING id"
)


class MemoryStore(MemorySearch):
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
        kept: list[uuid.UUID] = []
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for sk in sorted({r[3] for r in rows}):
                cur.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", (fence_lock_key(sk),))
            # reinforcing changes an existing row: never a held owner's (the gate; inserting is not a change)
            held = held_subjects(conn, {r[3] for r in rows}) if reinforce else set()
            for r in rows:
                digest = session_digest(self._secret, r[3], r[4]) if r[4] else None
                if reinforce and not r[24] and not r[25]:  # a correction stays its own row
                    sets = (r[13], r[20], r[7], r[16])  # reinforced_at, confidence, sessions, expiry
                    # owner, words, kind, purpose, retention, expiry, id; the fences
                    same = (r[3], r[27], r[5], r[14], r[15], r[16], r[0], r[3], digest, r[3], digest)
                    if r[3] in held:  # the held owner's row stays as it is (said); the observation is written
                        cur.execute(_WOULD_REINFORCE, same)
                        found = cur.fetchone()
                        if found is not None:
                            kept.append(found[0])
                    else:
                        cur.execute(_REINFORCE, (*sets, *same))
                        again = cur.fetchone()
                        if again is not None:
                            reinforced.append(again[0])
                            continue
                cur.execute(_FENCED_INSERT, (*r, r[3], digest, r[3], digest))
                if cur.fetchone() is not None:
                    inserted.append(r[0])
        return FencedWrite(inserted, len(rows) - len(inserted) - len(reinforced), reinforced, kept)

    @property
    def subject_secret(self) -> bytes:
        return self._secret

    def row_opener(self) -> Callable[[bytes, bytes], bytes | None]:
        """Rows' contents opened with one key lookup per data key for the opener's life (``DataKeyStore.opener``:
        ``(sealed, row id bytes)`` -> plaintext, ``None`` for a shredded key)."""
        return self._keys.opener()

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
